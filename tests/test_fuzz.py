"""Schemathesis against the served OpenAPI document, every check, two users: the API
never answers with a server error or a response that breaks its own schema."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

from app.settings import Settings
from tests.api_server import serve, signup_and_login
from tests.helpers import query

# Conformance to the document: these must never fail. The remaining checks of `--checks
# all` judge semantics a schema cannot state (a cron that never fires is schema-valid
# text); their findings are printed, not asserted.
MUST_PASS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
)
MIN_CASES = 500


def test_schemathesis_finds_no_server_error_or_schema_break(
    settings: Settings, tmp_path: Path
) -> None:
    with serve(settings) as base:
        fuzzer = signup_and_login(base, "fuzzer")
        other = signup_and_login(base, "other")
        query(
            settings.database_url or "",
            "UPDATE pgsched.users SET is_admin = true WHERE username = 'fuzzer'",
        )
        for _ in range(3):  # the other user's data the fuzzer must never see or touch
            other.post("/api/v1/me/jobs", json={"message": "not yours"})
        fuzzer.post("/api/v1/me/jobs", json={"message": "mine"})
        report = tmp_path / "schemathesis.ndjson"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "run",
                f"{base}/schema/openapi.json",
                "--checks",
                "all",
                "--max-examples",
                "20",
                "--seed",
                "20261121",
                "--header",
                f"Authorization: Bearer {fuzzer.token}",
                # a live stream never ends; deleting the fuzzer's own account ends the run
                "--exclude-path",
                "/api/v1/me/events",
                "--exclude-name",
                "DELETE /api/v1/me",
                "--report",
                "ndjson",
                "--report-ndjson-path",
                str(report),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=tmp_path,  # schemathesis keeps a cache in its working directory
        )
        remaining = other.get("/api/v1/me/jobs").json()["data"]
    outcomes: Counter[tuple[str, str]] = Counter()
    cases = 0
    for line in report.read_text().splitlines():
        event = json.loads(line)
        finished = event.get("ScenarioFinished")
        if not finished:
            continue
        recorder = finished.get("recorder") or {}
        cases += len(recorder.get("cases") or {})
        for checks in (recorder.get("checks") or {}).values():
            for check in checks:
                outcomes[(check["name"], check["status"])] += 1
    failures = {name: n for (name, status), n in outcomes.items() if status == "failure"}
    print(f"schemathesis: {cases} cases; failures by check: {failures or 'none'}")
    assert cases >= MIN_CASES, result.stdout[-2000:]
    for name in MUST_PASS:
        assert outcomes[(name, "success")] > 0, f"{name} never ran"
        assert failures.get(name, 0) == 0, (name, result.stdout[-4000:])
    assert len(remaining) == 3 and all(j["message"] == "not yours" for j in remaining)
