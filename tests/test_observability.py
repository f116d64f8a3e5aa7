"""Metrics against the database's own counts, the shipped alert rules and Grafana
dashboard against the metrics actually exported, and the CLI's read commands."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from app.settings import Settings
from tests.api_server import Client, free_port, serve, signup_and_login
from tests.helpers import ROOT, query, settings_env, start_worker, stop, wait_for
from tests.test_cli import pgsched

SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


def scrape(url: str) -> dict[str, float]:
    """Every sample of a /metrics page, keyed `name{label="v",…}` (labels sorted)."""
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(httpx.get(url, timeout=5).text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[f"{s.name}{{{labels}}}" if labels else s.name] = s.value
    return samples


def total(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels`."""
    found = 0.0
    for key, value in samples.items():
        base, _, rest = key.partition("{")
        if base == name and all(f'{k}="{v}"' in rest for k, v in labels.items()):
            found += value
    return found


def family_names(url: str) -> set[str]:
    names = set()
    for family in text_string_to_metric_families(httpx.get(url, timeout=5).text):
        names.add(family.name)
    return names


def _job(client: Client, task: str, **extra: Any) -> int:
    due = datetime.now(UTC).isoformat()
    response = client.post("/api/v1/me/jobs", json={"execute_at": due, "task": task, **extra})
    assert response.status_code == 201, response.text
    return int(response.json()["data"]["id"])


def test_metrics_after_100_jobs_match_the_database(settings: Settings, tmp_path: Path) -> None:
    port = free_port()
    worker = start_worker(settings, tmp_path / "worker.log", "--metrics-port", str(port))
    worker_metrics = f"http://127.0.0.1:{port}/metrics"
    try:
        wait_for("worker metrics", lambda: _reachable(worker_metrics), timeout=30)
        with serve(settings) as base:
            before = scrape(f"{base}/metrics")
            client = signup_and_login(base, "metered")
            for i in range(100):
                # every tenth fails once and for all: 10 dead letters
                if i % 10 == 9:
                    _job(client, "pgsched.fail", max_attempts=1)
                else:
                    _job(client, "pgsched.echo", message=f"job {i}")
            wait_for(
                "100 runs finished",
                lambda: (
                    query(
                        settings.database_url or "",
                        "SELECT count(*) AS n FROM pgsched.runs WHERE finished_at IS NOT NULL",
                    )[0]["n"]
                    == 100
                ),
                timeout=60,
            )
            # the worker counts an outcome once the completer hands it over
            wait_for(
                "worker counters",
                lambda: total(scrape(worker_metrics), "pgsched_runs_completed_total") == 100,
                timeout=10,
            )
            api = scrape(f"{base}/metrics")
        work = scrape(worker_metrics)
    finally:
        stop(worker)

    counts = {
        r["state"]: r["n"]
        for r in query(
            settings.database_url or "",
            "SELECT state::text, count(*) AS n FROM pgsched.runs GROUP BY 1",
        )
    }
    assert counts == {"succeeded": 90, "failed": 10}
    assert total(work, "pgsched_runs_claimed_total", executor="python") == 100
    for state, n in counts.items():
        assert total(work, "pgsched_runs_completed_total", state=state, executor="python") == n
    assert total(work, "pgsched_runs_failed_total", state="failed") == counts["failed"]
    assert work["pgsched_run_start_lateness_seconds_count"] == 100
    assert total(work, "pgsched_run_duration_seconds_count") == 100
    assert total(work, "pgsched_claim_batch_size_sum") == 100
    assert work["pgsched_heartbeats_total"] > 0
    assert work["pgsched_leader"] == 1
    lateness_sum = work["pgsched_run_start_lateness_seconds_sum"]
    db_lateness = query(
        settings.database_url or "",
        "SELECT sum(extract(epoch FROM started_at - due_at))::float8 AS s FROM pgsched.runs",
    )[0]["s"]
    assert lateness_sum == pytest.approx(db_lateness, abs=0.01)

    created = '{app_name="pgsched",method="POST",path="/api/v1/me/jobs",status_code="201"}'
    key = f"pgsched_api_requests_total{created}"
    assert api[key] - before.get(key, 0) == 100
    assert total(api, "pgsched_api_request_duration_seconds_count", path="/api/v1/me/jobs") >= 100
    assert api["pgsched_dead_letters"] == 10
    assert api["pgsched_workers_live"] == 1
    assert api["pgsched_leader_present"] == 1
    assert total(api, "pgsched_queue_due") == 0
    partitions = query(
        settings.database_url or "",
        "SELECT count(*) AS n FROM pg_inherits WHERE inhparent = 'pgsched.runs'::regclass",
    )[0]["n"]
    assert api["pgsched_partitions"] == partitions
    assert api["process_resident_memory_bytes"] > 0


def _reachable(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _exported(settings: Settings) -> set[str]:
    """Metric family names one API process exports (which includes the worker's: both
    come from app.metrics), after one request so the request families exist."""
    with serve(settings) as base:
        httpx.get(f"{base}/healthz")
        return family_names(f"{base}/metrics")


def _metric_names(expr: str) -> set[str]:
    names = set(re.findall(r"\b((?:pgsched|process)_[a-z0-9_]+)", expr))
    return {_family(n) for n in names}


def _family(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def test_alert_rules_parse_and_name_exported_metrics(settings: Settings) -> None:
    rules_path = ROOT / "deploy" / "prometheus" / "alerts.yml"
    promtool = shutil.which("promtool")
    if promtool:
        checked = subprocess.run(
            [promtool, "check", "rules", str(rules_path)], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout + checked.stderr
        tested = subprocess.run(
            [promtool, "test", "rules", "alerts_test.yml"],
            cwd=rules_path.parent,
            capture_output=True,
            text=True,
        )
        assert tested.returncode == 0, tested.stdout + tested.stderr
    rules = yaml.safe_load(rules_path.read_text())
    alerts = {r["alert"]: r for group in rules["groups"] for r in group["rules"]}
    assert set(alerts) == {
        "PgschedRunsLate",
        "PgschedDeadLetters",
        "PgschedApiServerErrors",
        "PgschedNoLeader",
        "PgschedWorkersGone",
    }
    assert alerts["PgschedRunsLate"]["for"] == "2m"
    assert ">= 10" in alerts["PgschedRunsLate"]["expr"]
    assert alerts["PgschedNoLeader"]["for"] == "1m"

    exported = {_family(n) for n in _exported(settings)}
    used = set().union(*(_metric_names(r["expr"]) for r in alerts.values()))
    assert used - exported == set()

    dashboard = json.loads((ROOT / "deploy" / "grafana" / "pgsched.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(exprs) >= 10
    used = set().union(*(_metric_names(e) for e in exprs))
    assert used - exported == set()
    titles = " ".join(p["title"] for p in dashboard["panels"]).lower()
    for needed in ("api latency", "lateness", "runs processed", "new jobs", "cpu", "memory"):
        assert needed in titles


def test_status_and_jobs_list_json_shapes(settings: Settings, tmp_path: Path) -> None:
    env = settings_env(settings)
    created = pgsched(env, "jobs", "create", "--at", "+5m", "--name", "later", "--json")
    assert created.returncode == 0, created.stderr
    job_id = json.loads(created.stdout)["id"]

    listed = pgsched(env, "jobs", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    jobs = json.loads(listed.stdout)
    assert [j["id"] for j in jobs] == [job_id]
    job = jobs[0]
    assert {"id", "name", "state", "schedule_kind", "executor", "next_run_at", "owner"} <= set(job)
    assert (job["name"], job["state"], job["schedule_kind"]) == ("later", "active", "once")
    assert job["execute_at"].endswith("Z")  # times are ISO 8601 in UTC

    report = pgsched(env, "status", "--json")
    assert report.returncode == 0, report.stderr
    status = json.loads(report.stdout)
    assert set(status) == {
        "at",
        "leader",
        "workers",
        "queue",
        "lateness_last_5m",
        "finished_last_hour",
        "dead_letters",
        "partitions",
    }
    assert status["leader"] is None and status["workers"] == []
    assert status["queue"]["scheduled"] == 1 and status["queue"]["due"] == 0
    assert isinstance(status["queue"]["oldest_due_seconds"], float)
    assert status["dead_letters"] == 0 and status["partitions"] > 0

    text = pgsched(env, "status")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert "no leader or no live workers" in lines[0]
    assert any(
        re.match(r"queue\s+0 due \(oldest 0\.0 s\), 1 scheduled, 0 running", x) for x in lines
    )
    assert any(re.match(r"dead letters\s+0$", x) for x in lines)

    table = pgsched(env, "jobs", "list")
    header, row = table.stdout.splitlines()[:2]
    assert header.split()[:3] == ["ID", "OWNER", "NAME"]
    assert row.split()[:3] == [str(job_id), "local", "later"]
    # columns line up: each header word starts where its value starts
    assert row.index("later") == header.index("NAME")
