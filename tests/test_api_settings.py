"""API settings that change behaviour: closed sign-up and CORS origins."""

from __future__ import annotations

import dataclasses

import httpx

from app.settings import Settings
from tests.api_server import serve


def test_signup_can_be_closed_and_cors_allows_only_listed_origins(settings: Settings) -> None:
    closed = dataclasses.replace(
        settings, signup_enabled=False, cors_origins=("https://ops.example",)
    )
    with serve(closed) as base:
        refused = httpx.post(
            f"{base}/api/v1/users", json={"username": "late", "password": "password123"}
        )
        assert refused.status_code == 403
        assert refused.json()["error"]["message"] == "sign-up is disabled on this server"
        preflight = {"Access-Control-Request-Method": "GET"}
        allowed = httpx.options(
            f"{base}/api/v1/me/jobs", headers={"Origin": "https://ops.example", **preflight}
        )
        assert allowed.headers.get("access-control-allow-origin") == "https://ops.example"
        other = httpx.options(
            f"{base}/api/v1/me/jobs", headers={"Origin": "https://evil.example", **preflight}
        )
        assert other.headers.get("access-control-allow-origin") is None
