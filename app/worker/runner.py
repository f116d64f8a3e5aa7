"""The worker: claim due runs, execute them, and hand outcomes to the completer.

The claim loop:

    while running:
        free = concurrency - executing
        if free: claim min(free, batch max) runs in one statement; start each
                 (a full batch means more may be due: claim again at once)
        sleep until woken: an execution ended (a slot freed), a NOTIFY said runs were
        inserted, the earliest known future due time arrived, or the slow poll fired.

Each claimed run is held (heartbeated) from its claim until its outcome is written, so
a run is never both unleased and unfinished while this worker lives. An execution stops
for one of four reasons: it ended, its timeout passed (`timed_out`), it was cancelled
(`cancelled`), or its lease was lost or the worker is shutting down (no outcome is
written: the run belongs to someone else, or is released back to the queue).

An execution is one asyncio task and, while it runs, one timer: a stop cancels the task,
and a second timer bounds how long it may take to wind down, after which its slot is
freed without it (so an executor that swallows cancellation cannot hold a slot).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

import psycopg
import structlog
from psycopg_pool import AsyncConnectionPool

from app import metrics
from app.clock import Clock
from app.domain.models import (
    Claim,
    Completion,
    ExecutorKind,
    LogStream,
    OverlapPolicy,
    RunKey,
    RunState,
)
from app.domain.retry import RetryPolicy
from app.settings import Settings
from app.store import jobs, runs, workers
from app.store.db import AsyncConn, OwnConnection, first_line, listen_forever
from app.worker.completer import Completer
from app.worker.executors.base import Executor, FatalError, RunLog, TaskContext
from app.worker.heartbeat import Heartbeat

log = structlog.get_logger("pgsched.worker")

# The claim window is refreshed this often and reaches WINDOW_AHEAD past the database
# clock, so its ceiling is always ahead of now() (see runs_queue_window).
WINDOW_REFRESH_SECONDS = 30.0
WINDOW_AHEAD = timedelta(minutes=2)
RECONNECT_DELAY_SECONDS = 0.5
# After cancelling an execution, how long to wait for it to wind down (a shell group
# gets SIGTERM, then SIGKILL after its own grace) before moving on.
STOP_WAIT_SECONDS = 3.0
REPLACE_POLL_SECONDS = 0.05


class StopReason(StrEnum):
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"
    LEASE_LOST = "lease_lost"
    SHUTDOWN = "shutdown"


@dataclass(eq=False, slots=True)
class Execution:
    claim: Claim
    started: float
    log: RunLog
    task: asyncio.Task[None] | None = None
    stop_reason: StopReason | None = None
    # the timeout while the executor runs; after a stop, the wind-down bound
    timer: asyncio.TimerHandle | None = None
    executing: bool = False
    settled: bool = False


def new_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Worker:
    def __init__(
        self,
        settings: Settings,
        pool: AsyncConnectionPool[AsyncConn],
        url: str,
        executors: dict[ExecutorKind, Executor],
        clock: Clock,
        *,
        worker_id: str | None = None,
    ) -> None:
        self.settings = settings
        self.id = worker_id or new_worker_id()
        self._pool = pool
        self._url = url
        self._executors = executors
        self._clock = clock
        self._executions: dict[int, Execution] = {}
        self._claim_conn = OwnConnection(url, name="pgsched-claim", setup=runs.CLAIM_SESSION)
        # Every run this worker holds (executing or outcome not yet written) and the
        # monotonic time its lease was last renewed (or claimed).
        self._held: dict[RunKey, float] = {}
        self._released: list[RunKey] = []
        self._wake = asyncio.Event()
        self._stopping = False
        self._window: tuple[datetime, datetime] | None = None
        self._window_at = 0.0
        # The earliest future due time, as a monotonic deadline, and whether it must be
        # asked again (see _sleep).
        self._due_timer: float | None = None
        self._due_stale = True
        self.completer = Completer(url, self.id, on_written=self._forget)
        self.heartbeat = Heartbeat(
            url,
            self.id,
            settings,
            clock,
            held=lambda: self._held,
            on_lost=lambda keys: self._stop_runs([k.id for k in keys], StopReason.LEASE_LOST),
            on_cancel=lambda ids: self._stop_runs(ids, StopReason.CANCELLED),
            running=lambda: len(self._executions),
        )
        self.claimed = 0
        metrics.RUNS_EXECUTING.set_function(lambda: len(self._executions))

    # -- lifecycle ---------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set, then shut down gracefully. If a side task dies, the
        worker stops rather than run half-alive."""
        async with self._pool.connection() as conn:
            await workers.register(
                conn,
                id=self.id,
                hostname=socket.gethostname(),
                pid=os.getpid(),
                concurrency=self.settings.concurrency,
            )
        log.info("worker_started", worker_id=self.id, concurrency=self.settings.concurrency)
        side = [
            asyncio.create_task(self.heartbeat.run(), name="heartbeat"),
            asyncio.create_task(self.completer.run(), name="completer"),
            asyncio.create_task(self._listen(), name="listener"),
        ]
        claim_loop = asyncio.create_task(self._claim_loop(), name="claim-loop")
        stopper = asyncio.create_task(stop.wait(), name="stop-signal")
        try:
            done, _ = await asyncio.wait(
                [*side, claim_loop, stopper], return_when=asyncio.FIRST_COMPLETED
            )
            for task in done:
                if task is not stopper and not task.cancelled() and task.exception():
                    log.error(
                        "worker_side_task_died", task=task.get_name(), error=repr(task.exception())
                    )
            self._stopping = True
            self._wake.set()
            await self._shutdown(claim_loop)
        finally:
            for task in [*side, claim_loop, stopper]:
                task.cancel()
            await asyncio.gather(*side, claim_loop, stopper, return_exceptions=True)
            await self._claim_conn.close()
            with contextlib.suppress(psycopg.Error):
                async with self._pool.connection(timeout=2) as conn:
                    await workers.deregister(conn, self.id)
        for task in done:
            if task is not stopper and not task.cancelled() and task.exception():
                raise RuntimeError(f"worker side task {task.get_name()} died") from task.exception()

    async def _shutdown(self, claim_loop: asyncio.Task[None]) -> None:
        """Stop claiming, give executions the grace period, stop and release the rest."""
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(claim_loop, 5)
        running = [e.task for e in self._executions.values() if e.task]
        if running:
            log.info("worker_draining", running=len(running))
            await asyncio.wait(running, timeout=self.settings.shutdown_grace.total_seconds())
        self._stop_runs(list(self._executions), StopReason.SHUTDOWN)
        left = [e.task for e in self._executions.values() if e.task]
        if left:
            await asyncio.wait(left, timeout=STOP_WAIT_SECONDS + 1)
        await self.completer.drain()
        if self._released:
            async with self._pool.connection() as conn:
                released = await runs.release(conn, self._released, worker_id=self.id)
            log.info("runs_released", count=released)
        log.info("worker_stopped", worker_id=self.id, claimed=self.claimed)

    # -- claiming ----------------------------------------------------------------------

    async def _claim_loop(self) -> None:
        while not self._stopping:
            free = self.settings.concurrency - len(self._executions)
            want = min(free, self.settings.claim_batch_max)
            got = 0
            if want > 0:
                try:
                    got = await self._claim(want)
                except psycopg.OperationalError as exc:
                    log.warning("claim_failed", error=first_line(exc))
                    await asyncio.sleep(RECONNECT_DELAY_SECONDS)
                    continue
                if got == want:
                    continue  # a full batch: more may be due right now
            await self._sleep(idle=want > 0)

    async def _claim(self, limit: int) -> int:
        async with self._claim_conn.use() as conn:
            window = await self._claim_window(conn)
            sent_at = self._clock.monotonic()
            claims = await runs.claim(
                conn, worker_id=self.id, limit=limit, lease=self.settings.lease, window=window
            )
        metrics.observe_claim(claims)
        for claim in claims:
            self._start(claim, sent_at)
        self.claimed += len(claims)
        return len(claims)

    async def _claim_window(self, conn: AsyncConn) -> tuple[datetime, datetime]:
        now = self._clock.monotonic()
        if self._window is None or now - self._window_at >= WINDOW_REFRESH_SECONDS:
            self._window = await runs.queue_window(conn, ahead=WINDOW_AHEAD)
            self._window_at = now
        return self._window

    async def _sleep(self, *, idle: bool) -> None:
        """Wait for a wake-up; with free slots, no longer than the next known due time.

        The next due time is asked of the database only when it may have changed: after
        a NOTIFY of inserted or released runs, after the timer for it fired, or after
        the listener reconnected. A slot freed by a finished execution changes nothing
        about it, so a busy worker with an empty queue does not ask once per run.
        """
        poll = self.settings.poll_interval.total_seconds()
        timeout = poll
        if idle:
            if self._due_stale:
                try:
                    async with self._claim_conn.use() as conn:
                        due_at, db_now = await runs.next_due(conn)
                except psycopg.OperationalError:
                    due_at, db_now = None, None
                    timeout = RECONNECT_DELAY_SECONDS
                else:
                    self._due_stale = False
                self._due_timer = (
                    self._clock.monotonic() + (due_at - db_now).total_seconds()
                    if due_at is not None and db_now is not None
                    else None
                )
            if self._due_timer is not None:
                timeout = min(timeout, max(0.0, self._due_timer - self._clock.monotonic()))
        woken = True
        if timeout > 0:
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                woken = False
        if not woken or (self._due_timer is not None and timeout == 0):
            # the timer (or the poll) fired: what was next is due now; ask again later
            self._due_stale = True
            self._due_timer = None
        self._wake.clear()

    def _runs_changed(self) -> None:
        self._due_stale = True
        self._wake.set()

    async def _listen(self) -> None:
        """LISTEN for inserted runs (wake up) and cancel requests."""
        await listen_forever(
            self._url,
            ("pgsched_runs", "pgsched_cancel"),
            name="pgsched-listener",
            on_connect=self._runs_changed,  # what was inserted meanwhile: ask again
            on_note=self._on_note,
        )

    def _on_note(self, note: psycopg.Notify) -> None:
        if note.channel == "pgsched_cancel" and note.payload:
            ids = [int(x) for x in note.payload.split(",") if x]
            self._stop_runs(ids, StopReason.CANCELLED)
        else:
            self._runs_changed()

    # -- executing ---------------------------------------------------------------------

    def _start(self, claim: Claim, claimed_at: float) -> None:
        s = self.settings
        run_log = RunLog(
            self._clock, max_lines=s.max_log_lines, max_line_bytes=s.max_log_line_bytes
        )
        execution = Execution(claim, claimed_at, run_log)
        self._executions[claim.id] = execution
        self._held[claim.key] = claimed_at
        execution.task = asyncio.create_task(self._execute(execution))

    def _stop_runs(self, run_ids: list[int], reason: StopReason) -> None:
        for run_id in run_ids:
            execution = self._executions.get(run_id)
            if execution is not None:
                self._stop(execution, reason)

    def _stop(self, execution: Execution, reason: StopReason) -> None:
        """Record why an execution must stop; if its executor is running, cancel it and
        give it STOP_WAIT_SECONDS to wind down (a shell group gets SIGTERM, then SIGKILL
        after its own grace). Before that, _execute sees the reason and does not start."""
        if execution.stop_reason is not None or execution.settled:
            return
        execution.stop_reason = reason
        if execution.executing and execution.task is not None:
            if execution.timer is not None:
                execution.timer.cancel()
            execution.task.cancel()
            execution.timer = asyncio.get_running_loop().call_later(
                STOP_WAIT_SECONDS, self._settle, execution, None
            )

    def _forget(self, keys: list[RunKey]) -> None:
        for key in keys:
            self._held.pop(key, None)

    async def _execute(self, execution: Execution) -> None:
        claim = execution.claim
        # Each execution is a task with its own copy of the context: bind without the
        # reset that bound_contextvars() pays for, the copy dies with the task.
        structlog.contextvars.bind_contextvars(
            run_id=claim.id, attempt=claim.attempt, job_id=claim.job_id, worker_id=self.id
        )
        completion: Completion | None = None
        try:
            if claim.overlap is not OverlapPolicy.ALLOW:
                completion = await self._admit(execution)
            if completion is None and execution.stop_reason is None:
                completion = await self._call(execution)
        except Exception as exc:
            # The task's own errors are outcomes already (_call); this is the worker's
            # (the overlap gate losing its connection, say). A claimed run must still get
            # an outcome, or it would stay held, and renewed, forever.
            log.exception("execution_error")
            completion = self._failed(execution, f"worker error: {first_line(exc)}", True)
        finally:
            self._settle(execution, completion)

    async def _call(self, execution: Execution) -> Completion | None:
        """Run the executor under the run's timeout; None if it was stopped."""
        claim = execution.claim
        ctx = TaskContext(
            run_id=claim.id,
            attempt=claim.attempt,
            job_id=claim.job_id,
            slot_at=claim.slot_at,
            payload=claim.payload,
            message=claim.message,
            log=execution.log,
        )
        execution.timer = asyncio.get_running_loop().call_later(
            claim.timeout.total_seconds(), self._stop, execution, StopReason.TIMEOUT
        )
        execution.executing = True
        try:
            await self._executors[claim.executor].execute(claim, ctx)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                return None  # our stop: _settle reports it by its reason
            return self._failed(execution, "execution was cancelled unexpectedly", True)
        except Exception as exc:
            message = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            return self._failed(execution, message, not isinstance(exc, FatalError))
        finally:
            execution.executing = False
        return Completion(claim.key, RunState.SUCCEEDED, None, None, execution.log.lines())

    def _settle(self, execution: Execution, completion: Completion | None) -> None:
        """Free the slot and hand the outcome on, once: when the execution ends, or when
        a stopped one has not wound down in time (whichever comes first)."""
        if execution.settled:
            return
        execution.settled = True
        if execution.timer is not None:
            execution.timer.cancel()
        claim = execution.claim
        self._executions.pop(claim.id, None)
        self._wake.set()  # a slot is free
        if execution.stop_reason is not None:
            completion = self._stopped(execution)
        if completion is None:
            return
        metrics.observe_outcome(
            completion.state.value,
            claim.executor.value,
            self._clock.monotonic() - execution.started,
        )
        self.completer.submit(completion)

    async def _admit(self, execution: Execution) -> Completion | None:
        """The overlap gate of a forbid/replace job (sql/jobs.sql jobs_overlap_gate);
        returns the `skipped` outcome of a run that may not start."""
        claim, run_log = execution.claim, execution.log
        async with self._pool.connection() as conn:
            gate = await jobs.overlap_gate(
                conn, job_id=claim.job_id, run_id=claim.id, due_at=claim.due_at
            )
            previous = gate["previous_id"]
            if not gate["admitted"]:
                reason = f"previous run {previous} still active (overlap forbid)"
                return self._ended(claim, RunState.SKIPPED, reason, None, run_log)
            if previous is None:
                return None
            # replace: the previous run was told to stop; start only once it has ended.
            s = self.settings
            deadline = self._clock.monotonic() + (s.lease * 2 + s.reclaim_interval).total_seconds()
            while self._clock.monotonic() < deadline and execution.stop_reason is None:
                row = await runs.get(conn, previous, owner_id=None)
                if row is None or RunState(row["state"]).is_final:
                    run_log.write(LogStream.SYSTEM, f"replaced run {previous}")
                    return None
                await asyncio.sleep(REPLACE_POLL_SECONDS)
        reason = f"previous run {previous} did not stop in time (overlap replace)"
        return self._ended(claim, RunState.SKIPPED, reason, None, run_log)

    def _stopped(self, execution: Execution) -> Completion | None:
        claim, run_log = execution.claim, execution.log
        reason = execution.stop_reason
        if reason is StopReason.TIMEOUT:
            log.info("run_timed_out")
            error = f"timed out after {claim.timeout.total_seconds():g}s"
            return self._ended(claim, RunState.TIMED_OUT, error, self._retry_in(claim), run_log)
        if reason is StopReason.CANCELLED:
            return self._ended(claim, RunState.CANCELLED, "cancelled", None, run_log)
        if reason is StopReason.SHUTDOWN:
            self._released.append(claim.key)
        else:
            log.warning("execution_abandoned", reason=str(reason))
        self._held.pop(claim.key, None)
        return None

    def _failed(self, execution: Execution, error: str, retriable: bool) -> Completion:
        claim = execution.claim
        retry_in = self._retry_in(claim) if retriable else None
        return self._ended(claim, RunState.FAILED, error, retry_in, execution.log)

    @staticmethod
    def _retry_in(claim: Claim) -> timedelta | None:
        policy = RetryPolicy(claim.max_attempts, claim.backoff_base, claim.backoff_max)
        return policy.delay(claim.attempt) if policy.has_attempts_left(claim.attempt) else None

    @staticmethod
    def _ended(
        claim: Claim, state: RunState, error: str, retry_in: timedelta | None, run_log: RunLog
    ) -> Completion:
        """The outcome of a run that did not succeed; its reason is its last log line."""
        run_log.write(LogStream.SYSTEM, error)
        return Completion(claim.key, state, error, retry_in, run_log.lines())
