"""The web dashboard: server-rendered pages under /ui, behind the API's own login.

The session is the API's access token in an HttpOnly, SameSite=Strict cookie, so it
expires like any token and a cross-site form cannot act with it; POSTs also check the
Origin header when the browser sends one. An admin sees every user's jobs; anyone else
sees only their own (another user's job is a 404, as in the API). Pages refresh their
<main> every few seconds by fetching themselves with `X-Partial: 1`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any
from urllib.parse import urlsplit

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from litestar.enums import RequestEncodingType
from litestar.exceptions import HTTPException
from litestar.params import Body, QueryParameter
from litestar.response import Redirect, Template

from app.api.accounts import MAX_ID, CurrentUser, Id, pool_of
from app.api.auth import Auth, User, user_of
from app.api.status import status_of
from app.console import fmt
from app.domain.models import JobState
from app.errors import AppError, ForbiddenError, UnauthorizedError, require_found
from app.settings import Settings
from app.store import jobs, run_logs, runs, stats

COOKIE = "pgsched_session"
REFRESH_SECONDS = 5
CHART_WIDTH = 600
CHART_HEIGHT = 160


class LoginForm(msgspec.Struct):
    username: Annotated[str, msgspec.Meta(max_length=200)]
    password: Annotated[str, msgspec.Meta(max_length=1024)]


Form = Annotated[LoginForm, Body(media_type=RequestEncodingType.URL_ENCODED)]


async def viewer(request: Request[Any, Any, Any]) -> User:
    token = request.cookies.get(COOKIE)
    if not token:
        raise UnauthorizedError("log in to see the dashboard")
    return await user_of(request, token)


def _scope(user: User) -> int | None:
    """The owner filter of a viewer: None (everyone) for an admin."""
    return None if user.is_admin else user.id


def _same_origin(request: Request[Any, Any, Any]) -> None:
    origin = request.headers.get("origin")
    if origin and urlsplit(origin).netloc != request.headers.get("host"):
        raise ForbiddenError("cross-origin form submission refused")


def _page(
    request: Request[Any, Any, Any],
    template: str,
    user: User | None,
    status_code: int = 200,
    **context: Any,
) -> Template:
    return Template(
        template_name=template,
        status_code=status_code,
        context={
            "user": user,
            "partial": request.headers.get("x-partial") == "1",
            "refresh": REFRESH_SECONDS,
            "live": False,
            "fmt": fmt,
            **context,
        },
    )


@dataclass(frozen=True)
class Chart:
    """An SVG line chart of start lateness (p95 and p99) by minute over the last hour."""

    p95: str
    p99: str
    top_seconds: float
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT


def lateness_chart(minutes: list[dict[str, Any]]) -> Chart:
    top = max([0.01, *(float(m["p99"]) for m in minutes if m["p99"] is not None)])
    step = CHART_WIDTH / max(1, len(minutes) - 1)

    def points(key: str) -> str:
        return " ".join(
            f"{i * step:.1f},{CHART_HEIGHT - float(m[key]) / top * CHART_HEIGHT:.1f}"
            for i, m in enumerate(minutes)
            if m[key] is not None
        )

    return Chart(p95=points("p95"), p99=points("p99"), top_seconds=top)


def _to_login(request: Request[Any, Any, Any], exc: UnauthorizedError) -> Response[Any]:
    response: Response[Any] = Redirect("/ui/login", status_code=303)
    if request.cookies.get(COOKIE):
        response.delete_cookie(COOKIE, path="/")
    return response


def _error_page(request: Request[Any, Any, Any], exc: Exception) -> Template:
    if isinstance(exc, AppError):
        status, message = status_of(exc), exc.message
    elif isinstance(exc, HTTPException):
        status, message = exc.status_code, str(exc.detail)
    else:  # pragma: no cover - only the types registered below arrive here
        raise exc
    return _page(request, "error.html", None, status_code=status, status=status, message=message)


class DashboardController(Controller):
    path = "/ui"
    include_in_schema = False
    dependencies = {"user": Provide(viewer)}
    exception_handlers = {
        UnauthorizedError: _to_login,
        AppError: _error_page,
        HTTPException: _error_page,
    }

    @get("/login")
    async def login_page(self, request: Request[Any, Any, Any]) -> Template:
        return _page(request, "login.html", None, error=None)

    @post("/login", status_code=303)
    async def login(self, request: Request[Any, Any, Any], data: Form) -> Response[Any]:
        _same_origin(request)
        auth: Auth = request.app.state.auth
        settings: Settings = request.app.state.settings
        try:
            async with pool_of(request).connection() as conn:
                row = await auth.login(conn, data.username, data.password)
        except UnauthorizedError as exc:
            return _page(request, "login.html", None, status_code=401, error=exc.message)
        token, _ = auth.issue_access(row["id"])
        response: Response[Any] = Redirect("/ui", status_code=303)
        response.set_cookie(
            COOKIE,
            token,
            path="/",
            max_age=int(settings.access_token_ttl.total_seconds()),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @post("/logout", status_code=303)
    async def logout(self, request: Request[Any, Any, Any], user: CurrentUser) -> Response[Any]:
        _same_origin(request)
        response: Response[Any] = Redirect("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    @get("/")
    async def overview(self, request: Request[Any, Any, Any], user: CurrentUser) -> Template:
        async with pool_of(request).connection() as conn:
            health = await stats.health(conn, owner_id=_scope(user))
        return _page(
            request,
            "overview.html",
            user,
            live=True,
            health=health,
            summary=health.summary,
            chart=lateness_chart(health.minutes),
        )

    @get("/jobs")
    async def job_list(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        job_state: Annotated[JobState | None, QueryParameter(name="state")] = None,
        name: Annotated[str | None, QueryParameter(max_length=200)] = None,
    ) -> Template:
        async with pool_of(request).connection() as conn:
            rows = await jobs.list_(
                conn, owner_id=_scope(user), limit=200, state=job_state, name=name
            )
        return _page(
            request,
            "jobs.html",
            user,
            live=True,
            jobs=rows,
            states=[s.value for s in JobState],
            state=job_state.value if job_state else "",
            name=name or "",
        )

    @get("/jobs/{job_id:int}")
    async def job_detail(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Template:
        async with pool_of(request).connection() as conn:
            job = require_found(await jobs.get(conn, job_id, owner_id=_scope(user)), "job", job_id)
            history = await runs.list_for_job(conn, job_id, owner_id=_scope(user), limit=100)
        return _page(request, "job.html", user, live=True, job=job, runs=history)

    @get("/runs/{run_id:int}")
    async def run_detail(
        self, request: Request[Any, Any, Any], user: CurrentUser, run_id: Id
    ) -> Template:
        async with pool_of(request).connection() as conn:
            run = require_found(await runs.get(conn, run_id, owner_id=_scope(user)), "run", run_id)
            lines = await run_logs.list_for_run(conn, run_id, owner_id=_scope(user))
        live = run["state"] in ("queued", "running")
        return _page(request, "run.html", user, live=live, run=run, logs=lines)

    @get("/dead")
    async def dead_letters(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        redriven: Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)] = None,
    ) -> Template:
        async with pool_of(request).connection() as conn:
            letters = await runs.dead_list(conn, owner_id=_scope(user), limit=200, before_id=None)
        return _page(request, "dead.html", user, letters=letters, redriven=redriven)

    @post("/dead/{run_id:int}/redrive", status_code=303)
    async def redrive(
        self, request: Request[Any, Any, Any], user: CurrentUser, run_id: Id
    ) -> Redirect:
        _same_origin(request)
        async with pool_of(request).connection() as conn:
            new = require_found(
                await runs.redrive(conn, run_id, owner_id=_scope(user)), "dead letter", run_id
            )
        return Redirect(f"/ui/dead?redriven={new['id']}", status_code=303)


@get("/", include_in_schema=False, status_code=303)
async def home() -> Redirect:
    return Redirect("/ui", status_code=303)
