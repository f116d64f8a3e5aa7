"""Built-in tasks every worker has."""

from __future__ import annotations

import asyncio

from app.worker.executors.base import FatalError, RetryableError, TaskContext
from app.worker.executors.python import task


@task("pgsched.echo")
async def echo(ctx: TaskContext) -> None:
    """A seed-API job (`message` only): record the message as the run's output."""
    ctx.info(ctx.message if ctx.message is not None else str(ctx.args.get("message", "")))


@task("pgsched.noop")
async def noop(ctx: TaskContext) -> None:
    """Does nothing: for benchmarks and smoke tests."""


@task("pgsched.sleep")
async def sleep(ctx: TaskContext) -> None:
    """Sleeps `args.seconds` (default 1)."""
    await asyncio.sleep(float(ctx.args.get("seconds", 1)))


@task("pgsched.fail")
async def fail(ctx: TaskContext) -> None:
    """Fails, retriably unless `args.fatal` is true: for trying retry policies."""
    if ctx.args.get("fatal"):
        raise FatalError(str(ctx.args.get("error", "failed on purpose")))
    raise RetryableError(str(ctx.args.get("error", "failed on purpose")))
