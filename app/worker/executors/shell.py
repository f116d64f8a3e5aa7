"""Shell executor: a command in its own process group, output captured, group killed on
timeout or cancel. Off unless the operator sets PGSCHED_SHELL_ENABLED."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from app.domain.models import Claim, LogStream
from app.worker.executors.base import FatalError, RetryableError, TaskContext

# How long a command gets to exit after SIGTERM before the whole group is SIGKILLed.
KILL_GRACE_SECONDS = 1.0


def _child_env(claim: Claim) -> dict[str, str]:
    # The worker's own settings (database URL and credentials) never reach the command.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGSCHED_")}
    env.update(
        PGSCHED_RUN_ID=str(claim.id),
        PGSCHED_ATTEMPT=str(claim.attempt),
        PGSCHED_JOB_ID=str(claim.job_id),
    )
    return env


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


class ShellExecutor:
    def __init__(self, *, enabled: bool) -> None:
        self._enabled = enabled

    async def execute(self, claim: Claim, ctx: TaskContext) -> None:
        if not self._enabled:
            raise FatalError("shell execution is disabled on this worker (PGSCHED_SHELL_ENABLED)")
        proc = await asyncio.create_subprocess_shell(
            claim.payload["command"],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,  # its own process group, so we can kill all of it
            limit=1 << 20,
            env=_child_env(claim),
        )
        pgid = proc.pid
        try:
            assert proc.stdout is not None and proc.stderr is not None
            await asyncio.gather(
                _pump(proc.stdout, ctx, LogStream.STDOUT),
                _pump(proc.stderr, ctx, LogStream.STDERR),
            )
            code = await proc.wait()
        except asyncio.CancelledError:
            _kill_group(pgid, signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), KILL_GRACE_SECONDS)
            raise
        finally:
            # Whatever the command left running in its group (background children) goes too.
            _kill_group(pgid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
        ctx.log.write(LogStream.SYSTEM, f"exit code {code}")
        if code != 0:
            raise RetryableError(f"command exited with code {code}")


async def _pump(stream: asyncio.StreamReader, ctx: TaskContext, kind: LogStream) -> None:
    while line := await stream.readline():
        ctx.log.write(kind, line.decode(errors="replace").rstrip("\n"))
