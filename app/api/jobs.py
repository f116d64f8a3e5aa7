"""Jobs, their runs, logs, notifications, and dead letters: everything under /me is the
caller's own; another user's job or run is a 404, exactly like a missing one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, delete, get, patch, post
from litestar.di import Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import HeaderParameter, JSONBody, QueryParameter

from app.api.accounts import MAX_ID, Authenticated, CurrentUser, Id, pool_of
from app.api.schemas import (
    ERRORS,
    Envelope,
    JobIn,
    JobOut,
    JobPatch,
    LogOut,
    NotificationOut,
    RunOut,
    out,
)
from app.api.text import reject_nul
from app.domain.job import JobSpec, edited, executor_of
from app.domain.models import ExecutorKind, JobState, MisfirePolicy, OverlapPolicy, RunState
from app.domain.schedule import Schedule
from app.errors import (
    ConflictError,
    ForbiddenError,
    NotFoundError,
    ValidationError,
    require_found,
)
from app.jobs import (
    cancel_job,
    create_job,
    edit_job,
    pause_job,
    resume_job,
    retry_policy,
    spec_of,
    trigger_job,
)
from app.settings import Settings
from app.store import jobs, notifications, run_logs, runs
from app.store.db import AsyncConn
from app.tasks import REGISTRY

Limit = Annotated[int, QueryParameter(ge=1, le=1000)]
BeforeId = Annotated[int | None, QueryParameter(ge=1, le=MAX_ID)]
When = Annotated[datetime | None, QueryParameter()]
IdempotencyKey = Annotated[
    str | None, HeaderParameter(name="Idempotency-Key", max_length=200, required=False)
]


def status_of(row: dict[str, Any]) -> str:
    """The seed API's one-word status: created, scheduled, running, retrying,
    succeeded, failed, paused or cancelled."""
    state, last = row["state"], row.get("last_run_state")
    if last == RunState.RUNNING:
        return "running"
    if state == JobState.COMPLETED:
        return "succeeded"
    if state == JobState.DEAD:
        return "failed"
    if state in (JobState.CANCELLED, JobState.PAUSED):
        return str(state)
    if last in (RunState.FAILED, RunState.TIMED_OUT, RunState.LOST):
        return "retrying"
    return "created" if row["schedule_kind"] == "once" else "scheduled"


def job_out(row: dict[str, Any]) -> JobOut:
    return out(JobOut, {**row, "user_id": row["owner_id"], "status": status_of(row)})


def spec_from(body: JobIn, user: CurrentUser, settings: Settings, key: str | None) -> JobSpec:
    http = msgspec.structs.asdict(body.http) if body.http else None
    reject_nul(
        message=body.message,
        name=body.name,
        task=body.task,
        shell=body.shell,
        cron=body.cron,
        timezone=body.timezone,
        args=body.args,
        http=http,
        notify_url=body.notify_url,
        idempotency_key=key,
    )
    now = datetime.now(UTC)
    schedule = Schedule.from_parts(
        execute_at=body.execute_at,
        cron=body.cron,
        interval=_seconds(body.interval_seconds),
        timezone=body.timezone,
        now=now,
    ) or Schedule.once(now, body.timezone)
    executor, task, payload = executor_of(
        http=http,
        shell=body.shell,
        task=body.task,
        args=body.args,
    )
    if executor is ExecutorKind.SHELL and not (settings.shell_enabled and user.shell_allowed):
        raise ForbiddenError(
            "shell jobs need the operator to enable them and an admin to allow you"
        )
    if task is not None:
        REGISTRY.require(task)
    return JobSpec(
        schedule=schedule,
        executor=executor,
        task=task,
        payload=payload,
        message=body.message,
        name=body.name,
        retry=retry_policy(
            settings,
            max_attempts=body.max_attempts,
            backoff_base=_seconds(body.backoff_base_seconds),
            backoff_max=_seconds(body.backoff_max_seconds),
        ),
        timeout=timedelta(seconds=body.timeout_seconds),
        priority=body.priority,
        overlap=OverlapPolicy(body.overlap),
        misfire=MisfirePolicy(body.misfire),
        starting_deadline=_seconds(body.starting_deadline_seconds),
        idempotency_key=key,
        notify_url=body.notify_url,
        notify_on_success="success" in body.notify_on,
        notify_on_failure="failure" in body.notify_on,
    )


def _seconds(value: float | None) -> timedelta | None:
    return timedelta(seconds=value) if value is not None else None


def _patched(spec: JobSpec, body: JobPatch) -> JobSpec:
    reject_nul(
        message=body.message,
        name=body.name,
        cron=body.cron,
        timezone=body.timezone,
        notify_url=body.notify_url,
    )
    return edited(
        spec,
        schedule=Schedule.from_parts(
            execute_at=body.execute_at,
            cron=body.cron,
            interval=_seconds(body.interval_seconds),
            timezone=body.timezone or spec.schedule.timezone,
            now=datetime.now(UTC),
        ),
        message=body.message,
        name=body.name,
        priority=body.priority,
        timeout=_seconds(body.timeout_seconds),
        max_attempts=body.max_attempts,
        overlap=OverlapPolicy(body.overlap) if body.overlap else None,
        misfire=MisfirePolicy(body.misfire) if body.misfire else None,
        starting_deadline=_seconds(body.starting_deadline_seconds),
        notify_url=body.notify_url,
    )


async def _job(request: Request[Any, Any, Any], job_id: int, user: CurrentUser) -> dict[str, Any]:
    async with pool_of(request).connection() as conn:
        return require_found(await jobs.get(conn, job_id, owner_id=user.id), "job", job_id)


async def _acted(
    request: Request[Any, Any, Any],
    job_id: int,
    user: CurrentUser,
    action: Callable[[AsyncConn], Awaitable[Any]],
) -> Envelope[JobOut]:
    """Run a use-case on the caller's job, then answer with the job as it now stands,
    on one connection."""
    async with pool_of(request).connection() as conn:
        await action(conn)
        row = await jobs.get(conn, job_id, owner_id=user.id)
    return Envelope(job_out(require_found(row, "job", job_id)))


class JobsController(Authenticated):
    path = "/api/v1/me/jobs"
    tags = ["jobs"]

    @get("/", responses=ERRORS, summary="The caller's jobs, newest first")
    async def list_jobs(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        limit: Limit = 50,
        before_id: BeforeId = None,
        state_filter: Annotated[JobState | None, QueryParameter(name="state")] = None,
    ) -> Envelope[list[JobOut]]:
        async with pool_of(request).connection() as conn:
            rows = await jobs.list_(
                conn, owner_id=user.id, limit=limit, before_id=before_id, state=state_filter
            )
        return Envelope([job_out(r) for r in rows])

    @post(
        "/",
        responses={
            **ERRORS,
            200: ResponseSpec(
                Envelope[JobOut],
                description="The job an earlier request with the same Idempotency-Key created",
                generate_examples=False,
            ),
        },
        summary="Create a job (Idempotency-Key: the same key returns the same job)",
    )
    async def create(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        data: JSONBody[JobIn],
        idempotency_key: IdempotencyKey = None,
    ) -> Response[Envelope[JobOut]]:
        settings: Settings = request.app.state.settings
        spec = spec_from(data, user, settings, idempotency_key)
        async with pool_of(request).connection() as conn:
            created = await create_job(conn, user.id, spec, settings, request.app.state.waker)
            row = await jobs.get(conn, created.job["id"], owner_id=user.id)
        assert row is not None
        return Response(Envelope(job_out(row)), status_code=201 if created.created else 200)

    @get("/{job_id:int}", responses=ERRORS, summary="One job")
    async def get_job(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Envelope[JobOut]:
        return Envelope(job_out(await _job(request, job_id, user)))

    @patch(
        "/{job_id:int}", responses=ERRORS, summary="Edit a job; a new schedule is planned from now"
    )
    async def edit(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        job_id: Id,
        data: JSONBody[JobPatch],
    ) -> Envelope[JobOut]:
        settings: Settings = request.app.state.settings
        spec = _patched(spec_of(await _job(request, job_id, user)), data)
        return await _acted(
            request, job_id, user, lambda c: edit_job(c, job_id, spec, settings, owner_id=user.id)
        )

    @delete(
        "/{job_id:int}",
        responses=ERRORS,
        status_code=200,
        summary="Delete a job (its runs are cancelled)",
    )
    async def remove(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Envelope[JobOut]:
        row = await _job(request, job_id, user)
        async with pool_of(request).connection() as conn:
            if row["state"] in (JobState.ACTIVE, JobState.PAUSED):
                await cancel_job(conn, job_id, owner_id=user.id)
            await jobs.delete(conn, job_id, owner_id=user.id)
        return Envelope(job_out({**row, "state": JobState.CANCELLED}))

    @post(
        "/{job_id:int}/cancel",
        responses=ERRORS,
        status_code=200,
        summary="Cancel a job and its runs",
    )
    async def cancel(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Envelope[JobOut]:
        return await _acted(
            request, job_id, user, lambda c: cancel_job(c, job_id, owner_id=user.id)
        )

    @post("/{job_id:int}/pause", responses=ERRORS, status_code=200, summary="Pause a job")
    async def pause(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Envelope[JobOut]:
        return await _acted(request, job_id, user, lambda c: pause_job(c, job_id, owner_id=user.id))

    @post("/{job_id:int}/resume", responses=ERRORS, status_code=200, summary="Resume a paused job")
    async def resume(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Envelope[JobOut]:
        settings: Settings = request.app.state.settings
        return await _acted(
            request, job_id, user, lambda c: resume_job(c, job_id, settings, owner_id=user.id)
        )

    @post("/{job_id:int}/trigger", responses=ERRORS, status_code=201, summary="Run a job now")
    async def trigger(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id
    ) -> Envelope[RunOut]:
        settings: Settings = request.app.state.settings
        async with pool_of(request).connection() as conn:
            run = await trigger_job(
                conn, job_id, settings, owner_id=user.id, waker=request.app.state.waker
            )
            row = await runs.get(conn, run["id"], owner_id=user.id)
        assert row is not None
        return Envelope(out(RunOut, row))

    @get("/{job_id:int}/runs", responses=ERRORS, summary="A job's runs (history), newest first")
    async def list_runs(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        job_id: Id,
        limit: Limit = 50,
        before_id: BeforeId = None,
        state_filter: Annotated[RunState | None, QueryParameter(name="state")] = None,
        since: When = None,
        until: When = None,
    ) -> Envelope[list[RunOut]]:
        await _job(request, job_id, user)
        for name, when in (("since", since), ("until", until)):
            if when is not None and when.tzinfo is None:
                raise ValidationError(f"{name} needs a UTC offset", field=name)
        async with pool_of(request).connection() as conn:
            rows = await runs.list_for_job(
                conn,
                job_id,
                owner_id=user.id,
                limit=limit,
                state=state_filter,
                since=since,
                until=until,
                before_id=before_id,
            )
        return Envelope([out(RunOut, r) for r in rows])

    @get(
        "/{job_id:int}/notifications",
        responses=ERRORS,
        summary="A job's webhook deliveries and attempts",
    )
    async def list_notifications(
        self, request: Request[Any, Any, Any], user: CurrentUser, job_id: Id, limit: Limit = 50
    ) -> Envelope[list[NotificationOut]]:
        await _job(request, job_id, user)
        async with pool_of(request).connection() as conn:
            rows = await notifications.list_for_job(conn, job_id, owner_id=user.id, limit=limit)
        return Envelope([out(NotificationOut, r) for r in rows])


async def _run(request: Request[Any, Any, Any], run_id: int, user: CurrentUser) -> dict[str, Any]:
    async with pool_of(request).connection() as conn:
        return require_found(await runs.get(conn, run_id, owner_id=user.id), "run", run_id)


class RunsController(Authenticated):
    path = "/api/v1/me/runs"
    tags = ["runs"]

    @get("/{run_id:int}", responses=ERRORS, summary="One run")
    async def get_run(
        self, request: Request[Any, Any, Any], user: CurrentUser, run_id: Id
    ) -> Envelope[RunOut]:
        return Envelope(out(RunOut, await _run(request, run_id, user)))

    @get("/{run_id:int}/logs", responses=ERRORS, summary="What a run printed or logged")
    async def logs(
        self, request: Request[Any, Any, Any], user: CurrentUser, run_id: Id
    ) -> Envelope[list[LogOut]]:
        await _run(request, run_id, user)
        async with pool_of(request).connection() as conn:
            rows = await run_logs.list_for_run(conn, run_id, owner_id=user.id)
        return Envelope([out(LogOut, r) for r in rows])

    @post(
        "/{run_id:int}/cancel",
        responses=ERRORS,
        status_code=200,
        summary="Cancel a queued or running run",
    )
    async def cancel(
        self, request: Request[Any, Any, Any], user: CurrentUser, run_id: Id
    ) -> Envelope[RunOut]:
        async with pool_of(request).connection() as conn:
            result = await runs.cancel(conn, run_id, owner_id=user.id)
        if result["state"] is None:
            raise NotFoundError(f"run {run_id} not found")
        if result["was"] is None:
            raise ConflictError(f"run {run_id} is already {result['state']}")
        return Envelope(out(RunOut, await _run(request, run_id, user)))


class DeadLettersController(Authenticated):
    path = "/api/v1/me/dead"
    tags = ["runs"]

    @get("/", responses=ERRORS, summary="Dead letters: runs whose slot exhausted its retries")
    async def list_dead(
        self,
        request: Request[Any, Any, Any],
        user: CurrentUser,
        limit: Limit = 50,
        before_id: BeforeId = None,
    ) -> Envelope[list[RunOut]]:
        async with pool_of(request).connection() as conn:
            rows = await runs.dead_list(conn, owner_id=user.id, limit=limit, before_id=before_id)
        return Envelope([out(RunOut, r) for r in rows])

    @post(
        "/{run_id:int}/redrive",
        responses=ERRORS,
        status_code=201,
        summary="One more attempt, due now",
    )
    async def redrive(
        self, request: Request[Any, Any, Any], user: CurrentUser, run_id: Id
    ) -> Envelope[RunOut]:
        async with pool_of(request).connection() as conn:
            row = require_found(
                await runs.redrive(conn, run_id, owner_id=user.id), "dead letter", run_id
            )
            new = await runs.get(conn, row["id"], owner_id=user.id)
        assert new is not None
        return Envelope(out(RunOut, new))


__all__ = ["DeadLettersController", "JobsController", "Provide", "RunsController"]
