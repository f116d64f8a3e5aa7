"""The REST API over real HTTP (uvicorn on a local port) against real Postgres: the seed
API's sequence, isolation between users, authentication failures, bad input, API keys,
admin, idempotency, dead letters, and the live event stream."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from app.settings import Settings
from tests.api_server import Client, serve, signup_and_login
from tests.helpers import query, start_worker, stop, wait_for


@pytest.fixture
def api(settings: Settings) -> Iterator[str]:
    with serve(settings) as base:
        yield base


@pytest.fixture
def worker(settings: Settings, tmp_path: Path) -> Iterator[None]:
    proc = start_worker(settings, tmp_path / "worker.log")
    yield
    stop(proc)


def _iso(delta: timedelta, offset_hours: int = 2) -> str:
    tz = datetime.now(UTC).astimezone().tzinfo if offset_hours is None else None
    del tz
    when = datetime.now(UTC) + delta
    return when.astimezone(
        __import__("datetime").timezone(timedelta(hours=offset_hours))
    ).isoformat()


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is True and set(body) == {"data", "success"}
    return body["data"]


def _error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and set(body["error"]) == {"code", "message", "details"}
    error: dict[str, Any] = body["error"]
    return error


def test_seed_api_sequence_end_to_end(api: str, worker: None) -> None:
    client = Client(api)
    user = _ok(
        client.post(
            "/api/v1/users",
            json={"username": "username", "password": "password", "job_weight": 1.0},
        ),
        201,
    )
    assert user["username"] == "username" and user["job_weight"] == 1
    login = _ok(
        client.post("/api/v1/auth/login", json={"username": "username", "password": "password"})
    )
    assert set(login) >= {"expire", "token", "user"}
    assert login["user"] == {**login["user"], "id": user["id"], "username": "username"}
    assert login["user"]["job_weight"] == 1
    client.token = login["token"]
    refreshed = _ok(client.post("/api/v1/auth/refresh"))
    assert set(refreshed) >= {"expire", "token"}
    client.token = refreshed["token"]

    job = _ok(
        client.post(
            "/api/v1/me/jobs",
            json={"message": "Hello world", "execute_at": _iso(timedelta(seconds=2))},
        ),
        201,
    )
    assert job["status"] == "created" and job["message"] == "Hello world"
    assert job["user_id"] == user["id"] and job["execute_at"]
    other = _ok(
        client.post(
            "/api/v1/me/jobs",
            json={"message": "later", "execute_at": _iso(timedelta(hours=3), -5)},
        ),
        201,
    )
    done = wait_for(
        "the job to run",
        lambda: (
            j
            if (j := _ok(client.get(f"/api/v1/me/jobs/{job['id']}")))["status"] == "succeeded"
            else None
        ),
        timeout=20,
        interval=0.2,
    )
    assert done["id"] == job["id"]
    listed = _ok(client.get("/api/v1/me/jobs"))
    assert {j["id"] for j in listed} == {job["id"], other["id"]}
    assert all(set(j) >= {"id", "user_id", "message", "status", "execute_at"} for j in listed)
    runs = _ok(client.get(f"/api/v1/me/jobs/{job['id']}/runs"))
    assert [r["state"] for r in runs] == ["succeeded"]
    logs = _ok(client.get(f"/api/v1/me/runs/{runs[0]['id']}/logs"))
    assert [line["line"] for line in logs] == ["Hello world"]
    cancelled = _ok(client.post(f"/api/v1/me/jobs/{other['id']}/cancel"))
    assert cancelled["status"] == "cancelled"
    assert _ok(client.get(f"/api/v1/me/jobs/{other['id']}"))["status"] == "cancelled"


def test_another_users_resources_are_404(api: str, worker: None) -> None:
    alice = signup_and_login(api, "alice")
    bob = signup_and_login(api, "bob")
    job = _ok(
        bob.post(
            "/api/v1/me/jobs",
            json={"task": "pgsched.fail", "args": {"fatal": True}, "max_attempts": 1},
        ),
        201,
    )
    wait_for(
        "bob's dead letter",
        lambda: _ok(bob.get("/api/v1/me/dead")),
        timeout=20,
        interval=0.2,
    )
    run_id = _ok(bob.get(f"/api/v1/me/jobs/{job['id']}/runs"))[0]["id"]
    key_id = _ok(bob.post("/api/v1/me/api-keys", json={"name": "ci"}), 201)["id"]
    missing = 9_000_000_000
    for method, path in [
        ("GET", f"/api/v1/me/jobs/{job['id']}"),
        ("PATCH", f"/api/v1/me/jobs/{job['id']}"),
        ("DELETE", f"/api/v1/me/jobs/{job['id']}"),
        ("POST", f"/api/v1/me/jobs/{job['id']}/cancel"),
        ("POST", f"/api/v1/me/jobs/{job['id']}/pause"),
        ("POST", f"/api/v1/me/jobs/{job['id']}/resume"),
        ("POST", f"/api/v1/me/jobs/{job['id']}/trigger"),
        ("GET", f"/api/v1/me/jobs/{job['id']}/runs"),
        ("GET", f"/api/v1/me/jobs/{job['id']}/notifications"),
        ("GET", f"/api/v1/me/runs/{run_id}"),
        ("GET", f"/api/v1/me/runs/{run_id}/logs"),
        ("POST", f"/api/v1/me/runs/{run_id}/cancel"),
        ("POST", f"/api/v1/me/dead/{run_id}/redrive"),
        ("DELETE", f"/api/v1/me/api-keys/{key_id}"),
    ]:
        kw = {"json": {"name": "x"}} if method == "PATCH" else {}
        theirs = alice.request(method, path, **kw)
        nothing = alice.request(
            method,
            path.replace(str(job["id"]), str(missing))
            .replace(str(run_id), str(missing))
            .replace(str(key_id), str(missing)),
            **kw,
        )
        assert theirs.status_code == 404, (method, path, theirs.text)
        assert nothing.status_code == 404
        assert theirs.json()["error"]["code"] == nothing.json()["error"]["code"] == "not_found"
    assert _ok(alice.get("/api/v1/me/jobs")) == []
    assert _ok(alice.get("/api/v1/me/dead")) == []
    assert _ok(alice.get("/api/v1/me/api-keys")) == []
    # Bob's things are untouched by all of that.
    assert _ok(bob.get(f"/api/v1/me/jobs/{job['id']}"))["state"] == "dead"
    assert len(_ok(bob.get("/api/v1/me/api-keys"))) == 1


def test_authentication_failures_are_401(api: str, settings: Settings) -> None:
    carol = signup_and_login(api, "carol")
    user_id = _ok(carol.get("/api/v1/me"))["id"]
    now = datetime.now(UTC)
    key = query(settings.database_url or "", "SELECT value FROM pgsched.secrets")[0]["value"]
    claims = {"sub": str(user_id), "iat": now, "typ": "access"}
    tokens = {
        "no token": None,
        "malformed": "not-a-jwt",
        "alg none": jwt.encode({**claims, "exp": now + timedelta(hours=1)}, None, algorithm="none"),
        "wrong key": jwt.encode({**claims, "exp": now + timedelta(hours=1)}, "x" * 32, "HS256"),
        "expired": jwt.encode({**claims, "exp": now - timedelta(seconds=1)}, key, "HS256"),
        "unknown api key": "pgs_nope",
    }
    for name, token in tokens.items():
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        response = httpx.get(f"{api}/api/v1/me/jobs", headers=headers)
        assert response.status_code == 401, name
        assert response.json()["error"]["code"] == "unauthorized"
    good = jwt.encode({**claims, "exp": now + timedelta(hours=1)}, key, "HS256")
    assert httpx.get(f"{api}/api/v1/me", headers={"Authorization": f"Bearer {good}"}).is_success
    _ok(carol.delete("/api/v1/me"))
    deleted = httpx.get(f"{api}/api/v1/me", headers={"Authorization": f"Bearer {carol.token}"})
    assert deleted.status_code == 401
    wrong_password = httpx.post(
        f"{api}/api/v1/auth/login", json={"username": "carol", "password": "nope nope"}
    )
    assert wrong_password.status_code == 401


def test_refresh_tokens_rotate_and_api_keys_authenticate(api: str) -> None:
    client = Client(api)
    client.post("/api/v1/users", json={"username": "dave", "password": "dave's password"})
    login = _ok(
        client.post("/api/v1/auth/login", json={"username": "dave", "password": "dave's password"})
    )
    fresh = _ok(
        httpx.post(f"{api}/api/v1/auth/refresh", json={"refresh_token": login["refresh_token"]})
    )
    assert fresh["token"] and fresh["refresh_token"] != login["refresh_token"]
    reused = httpx.post(
        f"{api}/api/v1/auth/refresh", json={"refresh_token": login["refresh_token"]}
    )
    assert reused.status_code == 401  # each refresh token works once
    client.token = fresh["token"]
    created = _ok(client.post("/api/v1/me/api-keys", json={"name": "deploy bot"}), 201)
    assert created["key"].startswith("pgs_")
    listed = _ok(client.get("/api/v1/me/api-keys"))
    assert [k["name"] for k in listed] == ["deploy bot"] and "key" not in listed[0]
    as_service = httpx.get(f"{api}/api/v1/me", headers={"X-API-Key": created["key"]})
    assert _ok(as_service)["username"] == "dave"
    _ok(client.delete(f"/api/v1/me/api-keys/{created['id']}"))
    assert httpx.get(f"{api}/api/v1/me", headers={"X-API-Key": created["key"]}).status_code == 401


def test_admin_sets_weights_and_shell_rights(api: str, settings: Settings) -> None:
    admin = signup_and_login(api, "root")
    eve = signup_and_login(api, "eve")
    eve_id = _ok(eve.get("/api/v1/me"))["id"]
    assert _error(admin.get("/api/v1/admin/users"), 403)["code"] == "forbidden"
    query(
        settings.database_url or "",
        "UPDATE pgsched.users SET is_admin = true WHERE username = 'root'",
    )
    assert {u["username"] for u in _ok(admin.get("/api/v1/admin/users"))} == {"root", "eve"}
    updated = _ok(
        admin.patch(f"/api/v1/admin/users/{eve_id}", json={"job_weight": 3, "shell_allowed": True})
    )
    assert updated["job_weight"] == 3 and updated["shell_allowed"] is True
    # The operator has not enabled shell execution on this server: still refused.
    refused = eve.post("/api/v1/me/jobs", json={"shell": "echo hi"})
    assert _error(refused, 403)["code"] == "forbidden"


def test_idempotency_key_header(api: str) -> None:
    client = signup_and_login(api, "frank")
    body = {"message": "once only", "execute_at": _iso(timedelta(hours=1))}
    first = client.post("/api/v1/me/jobs", json=body, headers={"Idempotency-Key": "abc"})
    again = client.post("/api/v1/me/jobs", json=body, headers={"Idempotency-Key": "abc"})
    assert first.status_code == 201 and again.status_code == 200
    assert _ok(first, 201)["id"] == _ok(again)["id"]
    assert len(_ok(client.get("/api/v1/me/jobs"))) == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"message": "x", "execute_at": "2030-01-01T10:00:00"}, "execute_at"),
        ({"message": "x", "execute_at": "0001-01-01T10:00:00Z"}, "execute_at"),
        ({"message": "x", "execute_at": "9999-01-01T10:00:00Z"}, "execute_at"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 0 31 2 *"}, "cron"),
        ({"cron": "* * * * *", "timezone": "Mars/Phobos"}, "timezone"),
        ({"message": "nul\u0000byte"}, "message"),
        ({"name": "a\u0000b", "message": "x"}, "name"),
        ({"message": "x", "priority": 1000}, "priority"),
        ({"message": "x", "surprise": 1}, "surprise"),
        ({"http": {"url": "ftp://x"}}, "url"),
        ({"task": "no.such.task"}, "task"),
        ({"message": "x", "cron": "* * * * *", "execute_at": "2030-01-01T00:00:00Z"}, "schedule"),
    ],
)
def test_bad_job_input_is_400_naming_the_field(api: str, body: dict[str, Any], field: str) -> None:
    client = signup_and_login(api, "grace")
    error = _error(client.post("/api/v1/me/jobs", json=body), 400)
    assert field in json.dumps(error), error


def test_bad_requests_are_4xx_never_500(api: str, settings: Settings) -> None:
    client = signup_and_login(api, "heidi")
    assert _error(client.get("/api/v1/me/jobs", params={"limit": 10**9}), 400)
    beyond = _error(client.get(f"/api/v1/me/jobs/{2**64}"), 400)
    assert "job_id" in beyond["message"]
    assert client.get(f"/api/v1/me/jobs/{2**53}").status_code == 404
    assert "job_id" in _error(client.get("/api/v1/me/jobs/-5"), 400)["message"]
    too_big = client.post(
        "/api/v1/me/jobs",
        content=b'{"message": "' + b"x" * 2_000_000 + b'"}',
        headers={"Content-Type": "application/json"},
    )
    assert _error(too_big, 413)
    assert _error(
        client.post(
            "/api/v1/me/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
        ),
        400,
    )
    since = client.get("/api/v1/me/jobs/1/runs", params={"since": "yesterday"})
    assert since.status_code in (400, 404)
    # SQL metacharacters are stored verbatim and the tables stay intact.
    name = "x'); DROP TABLE pgsched.jobs; --"
    created = _ok(
        client.post(
            "/api/v1/me/jobs",
            json={"message": name, "name": name, "execute_at": _iso(timedelta(hours=1))},
        ),
        201,
    )
    assert _ok(client.get(f"/api/v1/me/jobs/{created['id']}"))["name"] == name
    sneaky = Client(api)
    signup = sneaky.post(
        "/api/v1/users", json={"username": "bobby'; DROP TABLE users;--", "password": "password123"}
    )
    assert signup.status_code == 201
    users = query(settings.database_url or "", "SELECT count(*) AS n FROM pgsched.users")
    assert users[0]["n"] == 2
    duplicate = sneaky.post("/api/v1/users", json={"username": "heidi", "password": "password123"})
    assert _error(duplicate, 409)["details"] == {"field": "username"}


def test_dead_letter_redrive(api: str, worker: None) -> None:
    client = signup_and_login(api, "ivan")
    job = _ok(
        client.post(
            "/api/v1/me/jobs",
            json={"task": "pgsched.fail", "args": {"fatal": True}, "max_attempts": 1},
        ),
        201,
    )
    dead = wait_for(
        "a dead letter", lambda: _ok(client.get("/api/v1/me/dead")), timeout=20, interval=0.2
    )
    assert [d["job_id"] for d in dead] == [job["id"]]
    assert _ok(client.get(f"/api/v1/me/jobs/{job['id']}"))["status"] == "failed"
    again = _ok(client.post(f"/api/v1/me/dead/{dead[0]['id']}/redrive"), 201)
    assert again["attempt"] == 2
    assert _ok(client.get("/api/v1/me/dead")) == [] or wait_for(
        "the redriven run to die again", lambda: _ok(client.get("/api/v1/me/dead")), timeout=20
    )


def test_event_stream_reports_finished_runs(api: str, worker: None) -> None:
    client = signup_and_login(api, "judy")
    events: list[dict[str, Any]] = []
    connected = threading.Event()

    def listen() -> None:
        headers = {"Authorization": f"Bearer {client.token}"}
        with httpx.stream("GET", f"{api}/api/v1/me/events", headers=headers, timeout=30) as r:
            kind = None
            for line in r.iter_lines():
                if line.startswith(":"):
                    connected.set()
                elif line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:") and kind == "run":
                    events.append(json.loads(line[5:]))
                    return

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    assert connected.wait(10)
    job = _ok(client.post("/api/v1/me/jobs", json={"message": "stream me"}), 201)
    thread.join(20)
    assert events and events[0]["job_id"] == job["id"] and events[0]["state"] == "succeeded"


def test_runs_the_api_creates_wake_an_idle_worker_at_once(
    api: str, settings: Settings, tmp_path: Path
) -> None:
    # This worker polls once an hour: only the API's wake-ups can start these runs soon.
    slow = dataclasses.replace(settings, poll_interval=timedelta(hours=1))
    proc = start_worker(slow, tmp_path / "worker.log")
    try:
        client = signup_and_login(api, "kim")
        job = _ok(client.post("/api/v1/me/jobs", json={"message": "now"}), 201)
        # The worker may still be starting here; by the triggers it has slept since.
        runs_url = f"/api/v1/me/jobs/{job['id']}/runs"
        wait_for("the first run", lambda: _ok(client.get(runs_url)), timeout=20)
        for _ in range(3):
            wait_for(
                "the job's runs to finish",
                lambda: all(r["state"] == "succeeded" for r in _ok(client.get(runs_url))),
                timeout=20,
            )
            _ok(client.post(f"/api/v1/me/jobs/{job['id']}/trigger"), 201)
        wait_for(
            "the triggered runs to finish",
            lambda: query(
                settings.database_url or "",
                "SELECT count(*) = 4 AS done FROM pgsched.runs "
                "WHERE job_id = %(j)s AND state = 'succeeded'",
                {"j": job["id"]},
            )[0]["done"],
            timeout=20,
        )
    finally:
        stop(proc)
    rows = query(
        settings.database_url or "",
        "SELECT extract(epoch FROM started_at - due_at) AS late FROM pgsched.runs "
        "WHERE job_id = %(j)s ORDER BY id OFFSET 1",
        {"j": job["id"]},
    )
    assert len(rows) == 3 and all(r["late"] < 2 for r in rows), rows
