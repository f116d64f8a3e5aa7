"""The README's curl examples, run as written against a live API."""

from __future__ import annotations

import json
import re
import subprocess

from app.settings import Settings
from tests.api_server import serve
from tests.helpers import ROOT


def _curl_block() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("### With curl") :]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match
    return match.group(1)


def test_readme_curl_examples_run(settings: Settings) -> None:
    script = _curl_block()
    with serve(settings) as base:
        result = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("http://127.0.0.1:8080", base)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 0, result.stderr + result.stdout
    answers, text, decoder = [], result.stdout.strip(), json.JSONDecoder()
    while text:  # curl prints the bodies back to back
        answer, end = decoder.raw_decode(text)
        answers.append(answer)
        text = text[end:].strip()
    assert len(answers) == 6 and all(a["success"] for a in answers)
    created = answers[1]["data"]
    assert created["message"] == "Hello world" and created["status"] == "created"
    assert answers[-1]["data"]["status"] == "cancelled"
