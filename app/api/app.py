"""create_app: the Litestar application, its lifespan, and the one place errors become
HTTP responses (`{"success": false, "error": {code, message, details}}`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import psycopg
import structlog
from litestar import Litestar, Request, Response, get
from litestar.config.cors import CORSConfig
from litestar.exceptions import HTTPException, ValidationException
from litestar.openapi import OpenAPIConfig
from litestar.openapi.spec import Components, SecurityScheme
from litestar.plugins.jinja import JinjaTemplateEngine
from litestar.plugins.prometheus import PrometheusConfig
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.template.config import TemplateConfig

from app import __version__, metrics
from app.api.accounts import AdminController, AuthController, MeController, UsersController
from app.api.auth import Auth
from app.api.events import EventHub, EventsController
from app.api.jobs import DeadLettersController, JobsController, RunsController
from app.api.schemas import ERRORS, Envelope, ErrorDetail, ErrorEnvelope, Health
from app.api.status import status_of
from app.api.ui import DashboardController, home
from app.errors import (
    AppError,
)
from app.settings import Settings
from app.store import migrate, waker
from app.store.db import create_pool, first_line, translate
from app.worker.executors.python import import_modules

log = structlog.get_logger("pgsched.api")


def _error(
    status: int,
    code: str,
    message: str,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> Response[ErrorEnvelope]:
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    return Response(
        ErrorEnvelope(ErrorDetail(code=code, message=message, details=details)),
        status_code=status,
        headers=headers,
    )


def app_error(_: Request[Any, Any, Any], exc: AppError) -> Response[ErrorEnvelope]:
    status = status_of(exc)
    details = {"field": exc.field} if exc.field else None
    return _error(status, exc.code, exc.message, details)


def database_error(request: Request[Any, Any, Any], exc: psycopg.Error) -> Response[ErrorEnvelope]:
    translated = translate(exc)
    if type(translated) is AppError or translated.code == "store_error":
        log.error("database_error", path=request.url.path, error=first_line(exc))
    return app_error(request, translated)


def http_error(_: Request[Any, Any, Any], exc: HTTPException) -> Response[ErrorEnvelope]:
    if isinstance(exc, ValidationException):
        return _error(400, "invalid", _validation_message(exc), exc.extra)
    code = {
        401: "unauthorized",
        404: "not_found",
        405: "method_not_allowed",
        413: "payload_too_large",
    }.get(exc.status_code, "http_error")
    # 405 carries its Allow header, as RFC 9110 asks.
    return _error(exc.status_code, code, exc.detail, headers=dict(exc.headers or {}))


def _validation_message(exc: ValidationException) -> str:
    """Name the offending field(s): Litestar puts them in `extra`."""
    extra = exc.extra if isinstance(exc.extra, list) else []
    parts = [f"{e.get('key', '?')}: {e.get('message', '')}" for e in extra if isinstance(e, dict)]
    return "; ".join(parts) or exc.detail


def internal_error(request: Request[Any, Any, Any], exc: Exception) -> Response[ErrorEnvelope]:
    log.exception("request_failed", path=request.url.path)
    return _error(HTTP_500_INTERNAL_SERVER_ERROR, "internal", "internal server error")


@get("/healthz", responses=ERRORS, tags=["operations"], summary="The process is up")
async def healthz() -> Health:
    return Health(status="ok")


@get(
    "/readyz",
    responses=ERRORS,
    tags=["operations"],
    summary="The database is reachable and migrated",
)
async def readyz(request: Request[Any, Any, Any]) -> Response[Health]:
    try:
        async with request.app.state.pool.connection(timeout=2) as conn:
            applied = await migrate.applied_revision(conn)
    except Exception as exc:  # any failure here means "not ready", never a 500
        return Response(Health(status="unavailable", detail=type(exc).__name__), status_code=503)
    head = migrate.current_head()
    if applied != head:
        return Response(Health(status="migrations pending", detail=f"want {head}"), status_code=503)
    return Response(Health(status="ready"))


@get("/metrics", include_in_schema=False)
async def prometheus_metrics(request: Request[Any, Any, Any]) -> Response[bytes]:
    """This process's metrics, and the cluster's gauges read from the database now (a
    database that cannot answer leaves them at their last values)."""
    try:
        async with request.app.state.pool.connection(timeout=2) as conn:
            await metrics.refresh_database_gauges(conn)
    except psycopg.Error as exc:  # a scrape must still answer with the process metrics
        log.warning("metrics_database_unavailable", error=type(exc).__name__)
    body, content_type = metrics.exposition()
    return Response(body, media_type=content_type)


def create_app(settings: Settings, url: str) -> Litestar:
    # Jobs naming a python task are checked against the tasks this process knows.
    import_modules(settings.imports)

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        pool = create_pool(url, max_size=settings.pool_max, name="pgsched-api")
        await pool.open(wait=True, timeout=10)
        async with pool.connection() as conn:
            app.state.auth = await Auth.load(settings, conn)
        app.state.pool = pool
        app.state.settings = settings
        hub = EventHub(url)
        app.state.events = hub
        hub_task = asyncio.create_task(hub.run(), name="event-hub")
        try:
            async with waker.running(url) as wakes:
                app.state.waker = wakes  # create and trigger send their wake-ups through it
                yield
        finally:
            hub_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await hub_task
            await pool.close()

    # Requests by route template (not raw path) and status, with a latency histogram.
    requests = PrometheusConfig(
        app_name="pgsched",
        prefix="pgsched_api",
        group_path=True,
        buckets=list(metrics.SECONDS_BUCKETS),
        exclude=["/metrics"],
    )
    return Litestar(
        route_handlers=[
            healthz,
            readyz,
            prometheus_metrics,
            home,
            DashboardController,
            UsersController,
            AuthController,
            MeController,
            AdminController,
            JobsController,
            RunsController,
            DeadLettersController,
            EventsController,
        ],
        lifespan=[lifespan],
        middleware=[requests.middleware],
        template_config=TemplateConfig(
            directory=Path(__file__).parent / "templates", engine=JinjaTemplateEngine
        ),
        exception_handlers={
            AppError: app_error,
            psycopg.Error: database_error,
            HTTPException: http_error,
            Exception: internal_error,
        },
        request_max_body_size=settings.max_body_bytes,
        cors_config=CORSConfig(allow_origins=list(settings.cors_origins))
        if settings.cors_origins
        else None,
        openapi_config=OpenAPIConfig(
            title="pgsched",
            version=__version__,
            description="A distributed job scheduler whose only infrastructure is PostgreSQL.",
            components=Components(
                security_schemes={
                    "bearer": SecurityScheme(type="http", scheme="bearer", bearer_format="JWT")
                }
            ),
        ),
        debug=False,
    )


__all__ = ["Envelope", "create_app"]
