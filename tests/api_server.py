"""A real HTTP server for API tests: uvicorn serving create_app on a free port, in a
thread of the test process."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from app.api.app import create_app
from app.settings import Settings


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serve(settings: Settings) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, settings.database_url or ""),
            host="127.0.0.1",
            port=port,
            log_config=None,
            access_log=False,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the API server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


class Client:
    """A thin httpx wrapper that keeps a user's token."""

    def __init__(self, base: str, token: str | None = None) -> None:
        self.http = httpx.Client(base_url=base, timeout=15)
        self.token = token

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        headers = dict(kw.pop("headers", {}) or {})
        if self.token and "Authorization" not in headers:
            headers["Authorization"] = f"Bearer {self.token}"
        return self.http.request(method, path, headers=headers, **kw)

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("POST", path, **kw)

    def patch(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("PATCH", path, **kw)

    def delete(self, path: str, **kw: Any) -> httpx.Response:
        return self.request("DELETE", path, **kw)


def signup_and_login(base: str, username: str, password: str = "correct horse") -> Client:
    client = Client(base)
    created = client.post(
        "/api/v1/users", json={"username": username, "password": password, "job_weight": 1}
    )
    assert created.status_code == 201, created.text
    login = client.post("/api/v1/auth/login", json={"username": username, "password": password})
    assert login.status_code == 200, login.text
    client.token = login.json()["data"]["token"]
    return client
