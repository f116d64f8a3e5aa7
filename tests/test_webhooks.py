"""Success/failure webhooks through the outbox: signed deliveries, retries while the
receiver is down, and no loss when the worker dies between the final state's commit
and the delivery."""

from __future__ import annotations

import http.server
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.domain.webhook import SIGNATURE_HEADER, verify
from app.settings import Settings
from tests.api_server import Client, serve, signup_and_login
from tests.helpers import query, start_worker, stop, wait_for


@dataclass
class Receiver:
    url: str
    failures_left: int = 0
    received: list[tuple[dict[str, str], bytes]] = field(default_factory=list)
    refused: int = 0


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"] or 0))
            if state.failures_left > 0:
                state.failures_left -= 1
                state.refused += 1
                self.send_response(503)
                self.end_headers()
                return
            state.received.append((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()


@pytest.fixture
def client(settings: Settings) -> Iterator[Client]:
    with serve(settings) as base:
        yield signup_and_login(base, "hooked")


def _create(client: Client, receiver: Receiver, **body: Any) -> dict[str, Any]:
    response = client.post("/api/v1/me/jobs", json={"notify_url": receiver.url, **body})
    assert response.status_code == 201, response.text
    job: dict[str, Any] = response.json()["data"]
    return job


def _secret(client: Client) -> str:
    secret: str = client.get("/api/v1/me").json()["data"]["webhook_secret"]
    return secret


def test_one_signed_delivery_per_final_state(
    settings: Settings, client: Client, receiver: Receiver, tmp_path: Path
) -> None:
    ok = _create(client, receiver, message="fine")
    bad = _create(client, receiver, task="pgsched.fail", max_attempts=2)
    worker = start_worker(settings, tmp_path / "w.log")
    try:
        wait_for("two deliveries", lambda: len(receiver.received) >= 2, timeout=30)
        time.sleep(1)  # anything extra would arrive now
    finally:
        stop(worker)
    assert len(receiver.received) == 2, "the failed first attempt is not final: no delivery"
    secret = _secret(client)
    events = {}
    for headers, body in receiver.received:
        assert verify(secret, body, headers[SIGNATURE_HEADER], now=int(time.time()))
        assert not verify("wrong secret", body, headers[SIGNATURE_HEADER], now=int(time.time()))
        import json

        payload = json.loads(body)
        events[payload["job_id"]] = (headers["X-Pgsched-Event"], payload["state"])
    assert events == {ok["id"]: ("run.succeeded", "succeeded"), bad["id"]: ("run.failed", "failed")}
    listed = client.get(f"/api/v1/me/jobs/{ok['id']}/notifications").json()["data"]
    assert [(n["state"], n["attempts"]) for n in listed] == [("delivered", 1)]


def test_delivery_succeeds_after_the_receiver_was_down(
    settings: Settings, client: Client, receiver: Receiver, tmp_path: Path
) -> None:
    receiver.failures_left = 3
    job = _create(client, receiver, message="persistent")
    worker = start_worker(settings, tmp_path / "w.log")
    try:
        wait_for("the fourth attempt to land", lambda: receiver.received, timeout=30)
    finally:
        stop(worker)
    assert receiver.refused == 3 and len(receiver.received) == 1
    (delivery,) = client.get(f"/api/v1/me/jobs/{job['id']}/notifications").json()["data"]
    assert delivery["state"] == "delivered" and delivery["attempts"] == 4
    assert [h["status"] for h in delivery["history"]] == [503, 503, 503, 204]


def test_no_notification_is_lost_when_the_worker_dies_before_delivering(
    settings: Settings, client: Client, receiver: Receiver, tmp_path: Path
) -> None:
    url = settings.database_url or ""
    job = _create(client, receiver, message="survive me")
    # This worker records the final state but its notifier sleeps for an hour...
    sleepy = Settings(
        **{**settings.__dict__, "notify_interval": __import__("datetime").timedelta(hours=1)}
    )
    doomed = start_worker(sleepy, tmp_path / "doomed.log")
    try:
        wait_for(
            "the final state and its outbox row",
            lambda: query(
                url,
                "SELECT state FROM pgsched.notifications WHERE job_id = %(j)s",
                {"j": job["id"]},
            ),
            timeout=30,
        )
        doomed.send_signal(signal.SIGKILL)  # ... and dies before sending anything
        doomed.wait(5)
    finally:
        stop(doomed)
    assert receiver.received == []
    survivor = start_worker(settings, tmp_path / "survivor.log")
    try:
        wait_for("the delivery from another worker", lambda: receiver.received, timeout=30)
    finally:
        stop(survivor)
    assert len(receiver.received) == 1
