"""Connections: the pool factory, and the one place psycopg errors become AppErrors."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, LiteralString

import psycopg
import structlog
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from app.errors import AppError, ConflictError, StoreError, UnavailableError, ValidationError

AsyncConn = psycopg.AsyncConnection[dict[str, Any]]
Conn = psycopg.Connection[dict[str, Any]]

# Prepare hot statements server-side after their first use: the claim, heartbeat and
# completion run thousands of times a second and skip parsing and planning each time.
PREPARE_THRESHOLD = 1
LISTEN_RECONNECT_SECONDS = 0.5

log = structlog.get_logger("pgsched.db")


def sqlalchemy_url(url: str) -> str:
    """alembic needs SQLAlchemy's spelling of the same URL (psycopg 3 driver)."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def translate(exc: BaseException) -> AppError:
    """Map a psycopg error to the AppError a caller can act on."""
    if isinstance(exc, pg_errors.UniqueViolation):
        return ConflictError("that already exists")
    if isinstance(exc, pg_errors.ForeignKeyViolation):
        return ConflictError("a referenced row does not exist")
    if isinstance(
        exc,
        pg_errors.DataError
        | pg_errors.CheckViolation
        | pg_errors.NotNullViolation
        | pg_errors.InvalidTextRepresentation,
    ):
        return ValidationError(f"invalid value: {getattr(exc.diag, 'message_primary', exc)}")
    if isinstance(exc, psycopg.OperationalError):
        return UnavailableError(f"database unavailable: {first_line(exc)}")
    return StoreError(f"database error: {first_line(exc)}")


def first_line(exc: BaseException) -> str:
    """An error's first line, for logs and messages (psycopg's carry a multi-line context)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


async def _configure(conn: AsyncConn) -> None:
    conn.prepare_threshold = PREPARE_THRESHOLD
    await conn.set_autocommit(True)


def create_pool(
    url: str, *, max_size: int, name: str = "pgsched"
) -> AsyncConnectionPool[AsyncConn]:
    """An async pool that reconnects by itself after a Postgres restart."""
    return AsyncConnectionPool(
        url,
        min_size=1,
        max_size=max_size,
        open=False,
        name=name,
        kwargs={"row_factory": dict_row, "application_name": name},
        configure=_configure,
        check=AsyncConnectionPool.check_connection,
        reconnect_timeout=3600,
    )


async def connect(url: str, *, name: str = "pgsched") -> AsyncConn:
    """A dedicated connection, outside the pool (heartbeat, LISTEN)."""
    conn = await psycopg.AsyncConnection.connect(
        url, row_factory=dict_row, autocommit=True, application_name=name, connect_timeout=10
    )
    conn.prepare_threshold = PREPARE_THRESHOLD
    return conn


class OwnConnection:
    """A connection that one loop owns (the claim, the completer, the heartbeat): it
    skips the pool's checkout check, a round trip per use on the hot path, and cannot be
    starved by a busy pool. Opened on first use; dropped after a connection failure, so
    the next use reconnects (after a Postgres restart, say)."""

    def __init__(self, url: str, *, name: str, setup: tuple[LiteralString, ...] = ()) -> None:
        self._url = url
        self._name = name
        self._setup = setup
        self._conn: AsyncConn | None = None

    @contextlib.asynccontextmanager
    async def use(self) -> AsyncIterator[AsyncConn]:
        if self._conn is None or self._conn.closed:
            conn = await connect(self._url, name=self._name)
            for statement in self._setup:
                await conn.execute(statement)
            self._conn = conn
        try:
            yield self._conn
        except psycopg.OperationalError:
            await self.close()
            raise

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                await conn.close()


async def listen_forever(
    url: str,
    channels: tuple[str, ...],
    *,
    name: str,
    on_connect: Callable[[], None],
    on_note: Callable[[psycopg.Notify], None],
) -> None:
    """LISTEN on `channels` and hand every notification to `on_note`; reconnect forever.
    `on_connect` runs after each (re)connect, before any notification: what was sent
    while no one listened is lost, so the caller must catch up by reading."""
    while True:
        conn: AsyncConn | None = None
        try:
            conn = await connect(url, name=name)
            for channel in channels:
                await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
            on_connect()
            async for note in conn.notifies():
                on_note(note)
        except psycopg.OperationalError as exc:
            log.warning("listen_reconnecting", connection=name, error=first_line(exc))
            await asyncio.sleep(LISTEN_RECONNECT_SECONDS)
        finally:
            if conn is not None:
                with contextlib.suppress(psycopg.Error):
                    await conn.close()


def connect_sync(url: str, *, name: str = "pgsched-cli") -> Conn:
    try:
        return psycopg.Connection.connect(
            url, row_factory=dict_row, autocommit=True, application_name=name, connect_timeout=5
        )
    except psycopg.Error as exc:
        raise translate(exc) from None


@contextlib.asynccontextmanager
async def transaction(pool: AsyncConnectionPool[AsyncConn]) -> AsyncIterator[AsyncConn]:
    async with pool.connection() as conn, conn.transaction():
        yield conn


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise psycopg errors as AppErrors (for request and CLI paths)."""
    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc) from None
