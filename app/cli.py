"""The `pgsched` command: up, worker, migrate, jobs …; it wires the objects together."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import re
import secrets
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx
import psycopg
import structlog
from psycopg_pool import PoolTimeout

from app import embedded, metrics
from app.clock import SystemClock
from app.console import console, fmt, print_json, print_table, progress, table, to_json
from app.domain.job import JobSpec, edited, executor_of
from app.domain.models import ExecutorKind, JobState, MisfirePolicy, OverlapPolicy
from app.domain.schedule import Schedule
from app.errors import AppError, UnavailableError, ValidationError, require_found
from app.jobs import (
    cancel_job,
    create_job,
    edit_job,
    ensure_partitions,
    pause_job,
    resume_job,
    retry_policy,
    spec_of,
    trigger_job,
)
from app.log import configure_logging
from app.maintenance.elector import Elector
from app.maintenance.partitions import PartitionKeeper
from app.maintenance.reclaimer import Reclaimer
from app.notifier import Notifier
from app.planner import Planner
from app.settings import Settings
from app.store import jobs as jobs_store
from app.store import migrate as migrations
from app.store import run_logs, runs, stats, users
from app.store.db import AsyncConn, connect, create_pool, translate
from app.tasks import REGISTRY
from app.worker.executors.base import Executor
from app.worker.executors.http import HttpExecutor
from app.worker.executors.python import PythonExecutor, import_modules
from app.worker.executors.shell import ShellExecutor
from app.worker.runner import Worker

log = structlog.get_logger("pgsched")
T = TypeVar("T")

DEFAULT_OWNER = "local"
FINAL_JOB_STATES = (JobState.COMPLETED, JobState.CANCELLED, JobState.DEAD)
RUN_COLUMNS = [
    "id",
    "attempt",
    "state",
    "slot_at",
    "started_at",
    "finished_at",
    "lateness_seconds",
    "error",
]
POOL_OPEN_TIMEOUT = 10.0
API_START_POLL_SECONDS = 0.02


@contextmanager
def _errors() -> Iterator[None]:
    """Bad input and unreachable databases end in one line on stderr and exit 1."""
    try:
        yield
    except AppError as exc:
        raise click.ClickException(exc.message) from None
    except PoolTimeout:
        raise click.ClickException("database unavailable: could not connect in time") from None
    except psycopg.Error as exc:
        raise click.ClickException(translate(exc).message) from None


def _settings(ctx: click.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


def _url(settings: Settings) -> str:
    return settings.database_url or embedded.running_url(settings.data_dir)


class OneLineErrors(click.Group):
    """Every error, a usage error included, ends in one line on stderr and a non-zero
    exit (click's default adds the usage and a hint around it)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        try:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            click.echo(exc.format_message())  # a bare `pgsched` shows its help
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            click.echo(f"Error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted.", err=True)
            sys.exit(1)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--database-url", help="PostgreSQL URL [PGSCHED_DATABASE_URL].")
@click.option("--log-level", help="debug, info, warning or error [PGSCHED_LOG_LEVEL].")
@click.version_option(package_name="pgsched")
@click.pass_context
def main(ctx: click.Context, database_url: str | None, log_level: str | None) -> None:
    """pgsched: a distributed job scheduler whose only infrastructure is PostgreSQL."""
    with _errors():
        settings = Settings.from_env(os.environ).with_overrides(
            database_url=database_url, log_level=log_level
        )
    configure_logging(settings)
    ctx.obj = settings


# -- running -----------------------------------------------------------------------------


def _worker_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option(
        "--concurrency",
        type=click.IntRange(1, 10_000),
        help="Executions at once [PGSCHED_CONCURRENCY].",
    )(f)
    f = click.option(
        "--metrics-port",
        type=click.IntRange(1, 65535),
        help="Serve Prometheus metrics on this port [PGSCHED_METRICS_PORT].",
    )(f)
    f = click.option(
        "--import",
        "imports",
        multiple=True,
        help="Module defining @task functions (repeatable) [PGSCHED_IMPORTS].",
    )(f)
    return f


def _api_options(f: Callable[..., Any]) -> Callable[..., Any]:
    f = click.option("--port", type=click.IntRange(1, 65535), help="[PGSCHED_API_PORT]")(f)
    f = click.option("--host", help="Address to listen on [PGSCHED_API_HOST].")(f)
    return f


def _apply_worker_options(
    settings: Settings, concurrency: int | None, imports: Sequence[str], metrics_port: int | None
) -> Settings:
    return settings.with_overrides(
        concurrency=concurrency,
        imports=(*settings.imports, *imports) or None,
        metrics_port=metrics_port,
    )


@main.command()
@_worker_options
@_api_options
@click.pass_context
def up(
    ctx: click.Context,
    concurrency: int | None,
    imports: tuple[str, ...],
    metrics_port: int | None,
    host: str | None,
    port: int | None,
) -> None:
    """Run everything in one process (API, worker, planner, leader duties); embedded
    PostgreSQL unless a URL is given."""
    settings = _apply_worker_options(
        _settings(ctx), concurrency, imports, metrics_port
    ).with_overrides(api_host=host, api_port=port)
    with _errors():
        url = settings.database_url
        if url is None:
            url = embedded.start(settings.data_dir)
            log.info("embedded_postgres_started", data_dir=str(settings.data_dir))
        migrations.upgrade(url)
        log.info("migrated", revision=migrations.current_head())
        asyncio.run(serve(settings, url, with_api=True))


@main.command()
@_worker_options
@click.pass_context
def worker(
    ctx: click.Context,
    concurrency: int | None,
    imports: tuple[str, ...],
    metrics_port: int | None,
) -> None:
    """Run a worker (with its planner and the leader-elected maintenance duties)."""
    settings = _apply_worker_options(_settings(ctx), concurrency, imports, metrics_port)
    with _errors():
        asyncio.run(serve(settings, _url(settings)))


@main.command()
@_api_options
@click.pass_context
def api(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Serve the REST API (Litestar on uvicorn)."""
    settings = _settings(ctx).with_overrides(api_host=host, api_port=port)
    with _errors():
        url = _url(settings)
        asyncio.run(_serve_api(settings, url, asyncio.Event()))


async def _serve_api(
    settings: Settings, url: str, stop: asyncio.Event, ready: asyncio.Event | None = None
) -> None:
    """uvicorn in this event loop, until SIGTERM/SIGINT or `stop`; `ready` is set once
    it listens. A port it cannot bind is an UnavailableError, not uvicorn's exit."""
    import uvicorn

    from app.api.app import create_app

    await (await connect(url, name="pgsched-probe")).close()
    where = f"{settings.api_host}:{settings.api_port}"
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(settings, url),
            host=settings.api_host,
            port=settings.api_port,
            log_config=None,
            access_log=False,
            lifespan="on",
        )
    )

    async def run_server() -> None:
        try:
            await server.serve()
        except SystemExit:  # uvicorn exits the process when it cannot start
            raise UnavailableError(f"the API could not listen on {where}") from None

    serving = asyncio.create_task(run_server())
    # uvicorn offers no event for "listening", only its `started` flag: poll it briefly.
    while not server.started and not serving.done():  # noqa: ASYNC110
        await asyncio.sleep(API_START_POLL_SECONDS)
    if not server.started:
        await serving
        raise UnavailableError(f"the API could not listen on {where}")
    log.info("api_listening", host=settings.api_host, port=settings.api_port)
    if ready is not None:
        ready.set()
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([serving, stopper], return_when=asyncio.FIRST_COMPLETED)
    server.should_exit = True
    await serving
    stopper.cancel()


@main.command()
@click.option("--revision", default="head", show_default=True, help="Upgrade to this revision.")
@click.option("--downgrade", "down_to", help="Downgrade to this revision instead.")
@click.pass_context
def migrate(ctx: click.Context, revision: str, down_to: str | None) -> None:
    """Apply the database migrations (alembic)."""
    settings = _settings(ctx)
    with _errors(), progress("migrating", total=None):
        url = _url(settings)
        if down_to:
            migrations.downgrade(url, down_to)
        else:
            migrations.upgrade(url, revision)
            asyncio.run(_with_conn(url, lambda c: ensure_partitions(c, settings)))
    click.echo(f"migrated to {down_to or revision}")


async def _start_api(settings: Settings, url: str, stop: asyncio.Event) -> asyncio.Task[None]:
    """Start the API and wait until it listens (or fails, before any run is claimed)."""
    ready = asyncio.Event()
    api_task = asyncio.create_task(_serve_api(settings, url, stop, ready), name="api")
    ready_wait = asyncio.create_task(ready.wait())
    await asyncio.wait([api_task, ready_wait], return_when=asyncio.FIRST_COMPLETED)
    ready_wait.cancel()
    if api_task.done():
        await api_task  # raises why it could not start
    return api_task


async def serve(settings: Settings, url: str, *, with_api: bool = False) -> None:
    """Wire one process: pool, executors, worker, planner, elector, leader duties,
    notifier, and (for `up`) the API."""
    import_modules(settings.imports)
    clock = SystemClock()
    # Fail fast with one clear line if the database is not there at start; later the
    # pool reconnects by itself (a restart of Postgres is survived, not fatal).
    await (await connect(url, name="pgsched-probe")).close()
    pool = create_pool(url, max_size=settings.pool_max)
    await pool.open(wait=True, timeout=POOL_OPEN_TIMEOUT)
    async with pool.connection() as conn, conn.transaction():
        await ensure_partitions(conn, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if settings.metrics_port is not None:
        try:
            metrics.serve(settings.metrics_port, settings.metrics_host)
        except OSError as exc:
            where = f"{settings.metrics_host}:{settings.metrics_port}"
            raise UnavailableError(f"metrics could not listen on {where}: {exc}") from None
        log.info("metrics_listening", host=settings.metrics_host, port=settings.metrics_port)
    api_task = await _start_api(settings, url, stop) if with_api else None
    async with httpx.AsyncClient(follow_redirects=False) as client:
        executors: dict[ExecutorKind, Executor] = {
            ExecutorKind.PYTHON: PythonExecutor(REGISTRY),
            ExecutorKind.HTTP: HttpExecutor(client),
            ExecutorKind.SHELL: ShellExecutor(enabled=settings.shell_enabled),
        }
        the_worker = Worker(settings, pool, url, executors, clock)
        elector = Elector(pool, settings, clock, the_worker.id)
        planner = Planner(pool, settings)
        reclaimer = Reclaimer(pool, settings, lambda: elector.is_leader)
        keeper = PartitionKeeper(pool, settings, lambda: elector.is_leader)
        elector.on_elected(reclaimer, keeper)
        services = [elector, planner, reclaimer, keeper, Notifier(pool, settings, client)]
        # Elect, and plan (applying misfire policies) before the first claim, so runs
        # that went stale while no worker ran are resolved by policy, not all executed.
        await elector.run_once()
        await planner.run_once()
        for service in services:
            service.start(tick_now=service not in (elector, planner))
        try:
            await the_worker.run(stop)
        finally:
            if api_task:
                stop.set()
                await api_task
            for service in reversed(services):
                await service.stop()
            await pool.close()


@main.command()
@click.option(
    "--url",
    "bench_url",
    help="A server URL to create bench databases on (default: a fresh embedded PostgreSQL 18).",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="A scenario to run (repeatable; default: all); a wrong name lists them.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False),
    help="Also write the results as JSON here.",
)
def bench(bench_url: str | None, scenarios: tuple[str, ...], json_path: str | None) -> None:
    """Measure throughput, planning rate and claim cost (see scripts/bench)."""
    from app.bench import SCENARIOS, markdown, run_bench

    def progress(message: str) -> None:
        click.echo(f"\r\033[K{message}", nl=False, err=True)

    with _errors():
        results = run_bench(bench_url, list(scenarios or SCENARIOS), progress)
    click.echo("", err=True)
    click.echo(markdown(results))
    if json_path:
        Path(json_path).write_text(to_json([r.as_dict() for r in results]))


# -- jobs --------------------------------------------------------------------------------


async def _with_conn(url: str, work: Callable[[AsyncConn], Awaitable[T]]) -> T:
    conn = await connect(url, name="pgsched-cli")
    try:
        return await work(conn)
    finally:
        await conn.close()


def _run(ctx: click.Context, work: Callable[[AsyncConn], Awaitable[T]]) -> T:
    with _errors():
        return asyncio.run(_with_conn(_url(_settings(ctx)), work))


_RELATIVE = re.compile(r"^\+(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


def parse_when(text: str, *, now: datetime | None = None) -> datetime:
    """'now', '+30s' / '+5m' / '+2h' / '+1d', or ISO 8601 with a UTC offset."""
    now = now or datetime.now(UTC)
    if text == "now":
        return now
    relative = _RELATIVE.match(text)
    if relative:
        return now + timedelta(**{_UNITS[relative[2]]: float(relative[1])})
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError(
            f"--at {text!r} is not a time: use ISO 8601 with an offset "
            "(2030-01-01T09:00:00+01:00), 'now' or '+30s'"
        ) from None
    if when.tzinfo is None:
        raise ValidationError(f"--at {text!r} needs a UTC offset, e.g. {text}+00:00")
    return when


def _json_arg(text: str | None, name: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"{name} is not valid JSON: {exc.msg}") from None


def build_schedule(
    *, at: str | None, cron: str | None, every: float | None, tz: str
) -> Schedule | None:
    """The schedule that --at/--cron/--every describe, or None when none is given."""
    now = datetime.now(UTC)
    return Schedule.from_parts(
        execute_at=parse_when(at, now=now) if at is not None else None,
        cron=cron,
        interval=timedelta(seconds=every) if every is not None else None,
        timezone=tz,
        now=now,
    )


def build_spec(
    settings: Settings,
    *,
    at: str | None,
    cron: str | None,
    every: float | None,
    tz: str,
    shell: str | None,
    http: str | None,
    method: str,
    headers: tuple[str, ...],
    body: str | None,
    task: str | None,
    args: str | None,
    message: str | None,
    name: str,
    timeout: float,
    max_attempts: int | None,
    priority: int,
    idempotency_key: str | None,
    overlap: str,
    misfire: str,
    starting_deadline: float | None,
) -> JobSpec:
    """The JobSpec that `pgsched jobs create` options describe."""
    schedule = build_schedule(at=at, cron=cron, every=every, tz=tz) or Schedule.once(
        parse_when("now"), tz
    )
    http_payload = None
    if http is not None:
        parsed_headers = {}
        for header in headers:
            key, sep, value = header.partition(":")
            if not sep:
                raise ValidationError(f"--header {header!r} must be 'Name: value'")
            parsed_headers[key.strip()] = value.strip()
        body_value = _json_arg(body, "--body") if body and body[:1] in "{[" else body
        http_payload = {
            "url": http,
            "method": method,
            "headers": parsed_headers,
            "body": body_value,
        }
    parsed_args = _json_arg(args, "--args")
    if parsed_args is not None and not isinstance(parsed_args, dict):
        raise ValidationError("--args must be a JSON object")
    executor, task, payload = executor_of(
        http=http_payload, shell=shell, task=task, args=parsed_args
    )
    if executor is ExecutorKind.SHELL and not settings.shell_enabled:
        raise ValidationError("shell jobs are disabled: the operator sets PGSCHED_SHELL_ENABLED=1")
    if task is not None:
        REGISTRY.require(task)
    return JobSpec(
        schedule=schedule,
        executor=executor,
        retry=retry_policy(settings, max_attempts=max_attempts),
        task=task,
        payload=payload,
        message=message,
        name=name,
        timeout=timedelta(seconds=timeout),
        priority=priority,
        idempotency_key=idempotency_key,
        overlap=OverlapPolicy(overlap),
        misfire=MisfirePolicy(misfire),
        starting_deadline=(
            timedelta(seconds=starting_deadline) if starting_deadline is not None else None
        ),
    )


def _policy_options(f: Callable[..., Any], *, defaults: bool) -> Callable[..., Any]:
    """--overlap/--misfire/--starting-deadline; with defaults for create, none for edit."""
    f = click.option(
        "--starting-deadline",
        type=click.FloatRange(0.001, None),
        help="Seconds after its slot a run may still start; later it is skipped.",
    )(f)
    f = click.option(
        "--misfire",
        type=click.Choice([p.value for p in MisfirePolicy]),
        default=MisfirePolicy.RUN_ONCE.value if defaults else None,
        show_default=defaults,
        help="Missed slots after downtime: coalesce, catch up all, or skip.",
    )(f)
    f = click.option(
        "--overlap",
        type=click.Choice([p.value for p in OverlapPolicy]),
        default=OverlapPolicy.ALLOW.value if defaults else None,
        show_default=defaults,
        help="When the previous run is still active: run anyway, skip, or replace it.",
    )(f)
    return f


@main.group()
def jobs() -> None:
    """Create, inspect and cancel jobs."""


@jobs.command("create")
@click.option("--at", help="When, for a one-off job: ISO 8601 with offset, 'now', '+30s'.")
@click.option("--cron", help="Cron expression (5 fields, or 6 with leading seconds).")
@click.option("--every", type=float, help="Run every N seconds.")
@click.option("--tz", default="UTC", show_default=True, help="IANA time zone of the schedule.")
@click.option("--shell", help="Shell command to run (needs PGSCHED_SHELL_ENABLED).")
@click.option("--http", help="URL to request; 2xx is success.")
@click.option("--method", default="POST", show_default=True, help="HTTP method.")
@click.option("--header", "headers", multiple=True, help="HTTP header 'Name: value'.")
@click.option("--body", help="HTTP body (JSON if it starts with { or [).")
@click.option("--task", help="Registered python task name (default: pgsched.echo).")
@click.option("--args", help="JSON object passed to the python task.")
@click.option("--import", "imports", multiple=True, help="Module defining @task functions.")
@click.option("--message", help="A message; the default task records it as output.")
@click.option("--name", default="", help="A name for people.")
@click.option(
    "--timeout",
    type=click.FloatRange(0.001, 86400),
    default=60,
    show_default=True,
    help="Seconds before the run is killed.",
)
@click.option("--max-attempts", type=click.IntRange(1, 100), help="Attempts before dead.")
@click.option("--priority", type=click.IntRange(-100, 100), default=0, show_default=True)
@click.option("--idempotency-key", help="Return the existing job if this key was used.")
@click.option("--owner", default=DEFAULT_OWNER, show_default=True, help="Owning user.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@functools.partial(_policy_options, defaults=True)
@click.pass_context
def jobs_create(
    ctx: click.Context, /, imports: tuple[str, ...], owner: str, as_json: bool, **options: Any
) -> None:
    """Create a job."""
    settings = _settings(ctx)
    with _errors():
        import_modules((*settings.imports, *imports))
        spec = build_spec(settings, **options)

    async def work(conn: AsyncConn) -> Any:
        user = await users.ensure(conn, owner)
        return await create_job(conn, user["id"], spec, settings)

    created = _run(ctx, work)
    if as_json:
        print_json(created.job)
    else:
        verb = "created" if created.created else "exists (idempotency key)"
        job = created.job
        click.echo(f"job {job['id']} {verb}: next run at {fmt(job['next_run_at'])}")


@jobs.command("list")
@click.option("--state", type=click.Choice([s.value for s in JobState]))
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs_list(ctx: click.Context, state: str | None, limit: int, as_json: bool) -> None:
    """List jobs, newest first."""
    rows = _run(
        ctx,
        lambda c: jobs_store.list_(
            c, owner_id=None, limit=limit, state=JobState(state) if state else None
        ),
    )
    if as_json:
        print_json(rows)
        return
    print_table(
        rows,
        [
            "id",
            "owner",
            "name",
            "schedule_kind",
            "executor",
            "state",
            "next_run_at",
            "last_run_state",
        ],
    )


@jobs.command("show")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs_show(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Show one job."""
    row = _run(ctx, lambda c: _require(jobs_store.get(c, job_id, owner_id=None), "job", job_id))
    if as_json:
        print_json(row)
        return
    for key, value in row.items():
        click.echo(f"{key:>26}: {fmt(value)}")


@jobs.command("runs")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.option("--limit", type=click.IntRange(1, 1000), default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs_runs(ctx: click.Context, job_id: int, limit: int, as_json: bool) -> None:
    """A job's runs (its execution history), newest first."""

    async def work(conn: AsyncConn) -> list[dict[str, Any]]:
        await _require(jobs_store.get(conn, job_id, owner_id=None), "job", job_id)
        return await runs.list_for_job(conn, job_id, owner_id=None, limit=limit)

    rows = _run(ctx, work)
    if as_json:
        print_json(rows)
        return
    print_table(rows, RUN_COLUMNS)


@jobs.command("logs")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.option(
    "--run",
    "run_id",
    type=click.IntRange(1, 2**63 - 1),
    help="A run id (default: the job's latest run).",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs_logs(ctx: click.Context, job_id: int, run_id: int | None, as_json: bool) -> None:
    """The captured output of a job's latest run (or of --run)."""

    async def work(conn: AsyncConn) -> list[dict[str, Any]]:
        await _require(jobs_store.get(conn, job_id, owner_id=None), "job", job_id)
        target = run_id
        if target is None:
            latest = await runs.list_for_job(conn, job_id, owner_id=None, limit=1)
            if not latest:
                raise ValidationError(f"job {job_id} has no runs yet")
            target = latest[0]["id"]
        run = await _require(runs.get(conn, target, owner_id=None), "run", target)
        if run["job_id"] != job_id:
            raise ValidationError(f"run {target} is not a run of job {job_id}")
        return await run_logs.list_for_run(conn, target, owner_id=None)

    rows = _run(ctx, work)
    if as_json:
        print_json(rows)
        return
    for row in rows:
        click.echo(f"{fmt(row['at'])} {row['stream']:<6} {row['line']}")


@jobs.command("cancel")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.pass_context
def jobs_cancel(ctx: click.Context, job_id: int) -> None:
    """Cancel a job: nothing more is planned, queued runs end, running ones are stopped."""
    result = _run(ctx, lambda c: cancel_job(c, job_id, owner_id=None))
    click.echo(
        f"job {job_id} cancelled: {result['queued_cancelled']} queued runs cancelled, "
        f"{result['running_signalled']} running runs told to stop"
    )


@jobs.command("pause")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.pass_context
def jobs_pause(ctx: click.Context, job_id: int) -> None:
    """Stop planning a job (its unstarted slots are dropped) until resumed."""
    _run(ctx, lambda c: pause_job(c, job_id, owner_id=None))
    click.echo(f"job {job_id} paused")


@jobs.command("resume")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.pass_context
def jobs_resume(ctx: click.Context, job_id: int) -> None:
    """Plan a paused job again from now on."""
    job = _run(ctx, lambda c: resume_job(c, job_id, _settings(ctx), owner_id=None))
    click.echo(f"job {job_id} resumed: next run at {fmt(job['next_run_at'])}")


@jobs.command("trigger")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.pass_context
def jobs_trigger(ctx: click.Context, job_id: int) -> None:
    """Run a job now, outside its schedule."""
    settings = _settings(ctx)
    run = _run(ctx, lambda c: trigger_job(c, job_id, settings, owner_id=None))
    click.echo(f"job {job_id} triggered: run {run['id']}")


@jobs.command("edit")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.option("--at", help="New one-off time.")
@click.option("--cron", help="New cron expression.")
@click.option("--every", type=float, help="New interval in seconds.")
@click.option("--tz", help="Time zone of the new schedule (default: the job's).")
@click.option("--name")
@click.option("--timeout", type=click.FloatRange(0.001, 86400))
@click.option("--max-attempts", type=click.IntRange(1, 100))
@click.option("--priority", type=click.IntRange(-100, 100))
@functools.partial(_policy_options, defaults=False)
@click.pass_context
def jobs_edit(ctx: click.Context, /, job_id: int, **options: Any) -> None:
    """Change a job's schedule or policies; its next slots are planned anew."""
    settings = _settings(ctx)

    async def work(conn: AsyncConn) -> dict[str, Any]:
        row = await _require(jobs_store.get(conn, job_id, owner_id=None), "job", job_id)
        spec = spec_of(row)
        schedule = build_schedule(
            at=options["at"],
            cron=options["cron"],
            every=options["every"],
            tz=options["tz"] or spec.schedule.timezone,
        )

        def seconds(name: str) -> timedelta | None:
            value = options[name]
            return timedelta(seconds=value) if value is not None else None

        spec = edited(
            spec,
            schedule=schedule,
            name=options["name"],
            priority=options["priority"],
            timeout=seconds("timeout"),
            max_attempts=options["max_attempts"],
            overlap=OverlapPolicy(options["overlap"]) if options["overlap"] else None,
            misfire=MisfirePolicy(options["misfire"]) if options["misfire"] else None,
            starting_deadline=seconds("starting_deadline"),
        )
        return await edit_job(conn, job_id, spec, settings, owner_id=None)

    job = _run(ctx, work)
    click.echo(f"job {job_id} updated: next run at {fmt(job['next_run_at'])}")


@jobs.command("watch")
@click.argument("job_id", type=click.IntRange(1, 2**63 - 1))
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 60),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, None),
    help="Stop watching after this many seconds (default: until the job settles).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON line per change.")
@click.pass_context
def jobs_watch(
    ctx: click.Context, job_id: int, interval: float, timeout: float | None, as_json: bool
) -> None:
    """Follow a job live: its state and latest runs, until it settles (completed,
    cancelled or dead, with nothing queued or running) or Ctrl-C."""
    from rich.live import Live

    async def snapshot(conn: AsyncConn) -> dict[str, Any]:
        job = await _require(jobs_store.get(conn, job_id, owner_id=None), "job", job_id)
        history = await runs.list_for_job(conn, job_id, owner_id=None, limit=10)
        return {"job": job, "runs": history}

    def settled(view: dict[str, Any]) -> bool:
        busy = any(r["state"] in ("queued", "running") for r in view["runs"])
        return view["job"]["state"] in FINAL_JOB_STATES and not busy

    def render(view: dict[str, Any]) -> Any:
        job = view["job"]
        title = (
            f"job {job['id']} {job['name'] or ''} [{job['state']}] "
            f"next run {fmt(job['next_run_at'])}"
        )
        return table(view["runs"], RUN_COLUMNS, title=title)

    async def watch(conn: AsyncConn) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        out = console()
        live = Live(console=out, auto_refresh=False) if out.is_terminal and not as_json else None
        last = None
        with live or contextlib.nullcontext():
            while True:
                view = await snapshot(conn)
                line = to_json(view, indent=None)
                if live is not None:
                    live.update(render(view), refresh=True)
                elif line != last:  # piped: print each change once
                    click.echo(line) if as_json else out.print(render(view))
                last = line
                if settled(view) or (deadline is not None and loop.time() >= deadline):
                    return
                await asyncio.sleep(interval)

    _run(ctx, watch)


# -- status, dead letters, users ---------------------------------------------------------


@main.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """One screen of health: leader, workers, queue depth, lateness, dead letters."""

    async def work(conn: AsyncConn) -> dict[str, Any]:
        health = await stats.health(conn)
        summary = health.summary
        return {
            "at": summary.at,
            "leader": summary.leader_id,
            "workers": health.workers,
            "queue": {
                "due": summary.due,
                "scheduled": summary.scheduled,
                "running": summary.running,
                "oldest_due_seconds": summary.oldest_due_seconds,
                "by_priority": summary.by_priority,
            },
            "lateness_last_5m": health.recent_lateness(5),
            "finished_last_hour": {
                "succeeded": health.finished_last_hour("succeeded"),
                "failed": health.finished_last_hour("failed"),
            },
            "dead_letters": summary.dead_letters,
            "partitions": summary.partitions,
        }

    report = _run(ctx, work)
    if as_json:
        print_json(report)
        return
    out = console()
    queue, late, done = report["queue"], report["lateness_last_5m"], report["finished_last_hour"]
    healthy = report["leader"] is not None and report["workers"]
    out.print(f"[bold]pgsched status[/] at {fmt(report['at'])}: ", end="")
    out.print("[green]healthy[/]" if healthy else "[red]no leader or no live workers[/]")
    out.print(f"leader        {report['leader'] or '[red]none[/]'}")
    out.print(f"workers       {len(report['workers'])} live")
    out.print(
        f"queue         {queue['due']} due (oldest {queue['oldest_due_seconds']:.1f} s), "
        f"{queue['scheduled']} scheduled, {queue['running']} running"
    )
    out.print(
        f"lateness 5m   {late['started']} started, p95 {fmt(late['p95_seconds'])} s, "
        f"p99 {fmt(late['p99_seconds'])} s"
    )
    out.print(f"last hour     {done['succeeded']} succeeded, {done['failed']} failed")
    out.print(f"dead letters  {report['dead_letters']}")
    out.print(f"partitions    {report['partitions']}")
    if report["workers"]:
        out.print(
            table(
                report["workers"],
                ["worker_id", "hostname", "pid", "running", "concurrency", "is_leader"],
            )
        )


@main.group()
def dead() -> None:
    """Dead letters: runs that exhausted their retries."""


@dead.command("list")
@click.option("--limit", type=click.IntRange(1, 10_000), default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def dead_list(ctx: click.Context, limit: int, as_json: bool) -> None:
    """Dead letters, newest first."""
    rows = _run(ctx, lambda c: runs.dead_list(c, owner_id=None, limit=limit, before_id=None))
    if as_json:
        print_json(rows)
        return
    print_table(rows, ["id", "job_id", "job_name", "attempt", "state", "finished_at", "error"])


@dead.command("redrive")
@click.argument("run_ids", nargs=-1, type=click.IntRange(1, 2**63 - 1))
@click.option("--all", "redrive_all", is_flag=True, help="Redrive every dead letter.")
@click.pass_context
def dead_redrive(ctx: click.Context, run_ids: tuple[int, ...], redrive_all: bool) -> None:
    """Give dead letters one more attempt, due now (with a progress bar for many)."""
    if not run_ids and not redrive_all:
        raise click.UsageError("give dead-letter run ids, or --all")

    async def work(conn: AsyncConn) -> int:
        ids = list(run_ids)
        if redrive_all:
            letters = await runs.dead_list(conn, owner_id=None, limit=10**9, before_id=None)
            ids = [r["id"] for r in letters]
        with progress("redriving", total=len(ids)) as bar:
            for run_id in ids:
                await _require(runs.redrive(conn, run_id, owner_id=None), "dead letter", run_id)
                bar.advance(bar.task_ids[0])
        return len(ids)

    click.echo(f"{_run(ctx, work)} dead letters redriven")


@main.group("users")
def users_group() -> None:
    """Accounts: create the first admin, list users."""


@users_group.command("create")
@click.argument("username")
@click.option("--admin", is_flag=True, help="May see and manage every user's jobs.")
@click.option("--weight", type=click.FloatRange(0.01, 1000), default=1.0, show_default=True)
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    help="Prompted for, hidden and twice, when not given.",
)
@click.pass_context
def users_create(
    ctx: click.Context, username: str, admin: bool, weight: float, password: str
) -> None:
    """Create a user who can log in to the API and the dashboard."""
    from app.api.auth import hash_password  # the API's hashing, without loading it at start

    if not password:
        raise click.BadParameter("must not be empty", param_hint="--password")

    async def work(conn: AsyncConn) -> dict[str, Any]:
        row = await users.insert(
            conn,
            username=username,
            password_hash=hash_password(password),
            job_weight=weight,
            is_admin=admin,
            webhook_secret=secrets.token_urlsafe(32),
        )
        if row is None:
            raise ValidationError(f"username {username!r} is taken")
        return row

    row = _run(ctx, work)
    click.echo(f"user {row['id']} {username} created{' (admin)' if admin else ''}")


@users_group.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def users_list(ctx: click.Context, as_json: bool) -> None:
    """Every user, with weight and rights."""
    rows = _run(ctx, lambda c: users.list_(c, limit=100_000))
    if as_json:
        print_json(rows)
        return
    print_table(rows, ["id", "username", "job_weight", "is_admin", "shell_allowed", "created_at"])


# -- output ------------------------------------------------------------------------------


async def _require(
    found: Awaitable[dict[str, Any] | None], what: str, ident: int
) -> dict[str, Any]:
    return require_found(await found, what, ident)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
