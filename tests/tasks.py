"""Tasks the process-level tests import into real workers (`--import tests.tasks`)."""

from __future__ import annotations

import asyncio
import os
import time

from app.tasks import RetryableError, TaskContext, task


def _ledger(event: str, ctx: TaskContext) -> None:
    # One short O_APPEND write per event: atomic between processes on a local disk.
    slot = ctx.slot_at.timestamp()
    line = f"{event} {ctx.run_id} {ctx.attempt} {slot} {os.getpid()} {time.time()}\n"
    fd = os.open(os.environ["TEST_LEDGER_PATH"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


@task("test.ledger")
async def ledger(ctx: TaskContext) -> None:
    """Record start and end of the execution; sleep `args.seconds` in between (or
    `args.first_seconds` on the first attempt, to make a run long only the first time)."""
    _ledger("start", ctx)
    seconds = ctx.args.get("first_seconds") if ctx.attempt == 1 else None
    await asyncio.sleep(float(seconds if seconds is not None else ctx.args.get("seconds", 0)))
    _ledger("end", ctx)


@task("test.flaky")
async def flaky(ctx: TaskContext) -> None:
    """Fail the first `args.failures` attempts, then succeed."""
    if ctx.attempt <= int(ctx.args.get("failures", 0)):
        raise RetryableError(f"attempt {ctx.attempt} fails on purpose")
    ctx.info(f"attempt {ctx.attempt} succeeded")


@task("test.stubborn")
async def stubborn(ctx: TaskContext) -> None:
    """Ignore the first cancellation and go on for `args.seconds` more: an executor that
    does not end promptly when stopped."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        await asyncio.sleep(float(ctx.args.get("seconds", 30)))
