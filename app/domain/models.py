"""The words of the domain; Postgres enums carry the same values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any


class ScheduleKind(StrEnum):
    ONCE = "once"
    CRON = "cron"
    INTERVAL = "interval"


class ExecutorKind(StrEnum):
    PYTHON = "python"
    HTTP = "http"
    SHELL = "shell"


class JobState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    COMPLETED = "completed"
    CANCELLED = "cancelled"
    DEAD = "dead"


class RunState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    LOST = "lost"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"

    @property
    def is_final(self) -> bool:
        return self not in (RunState.QUEUED, RunState.RUNNING)


class OverlapPolicy(StrEnum):
    ALLOW = "allow"
    FORBID = "forbid"
    REPLACE = "replace"


class MisfirePolicy(StrEnum):
    RUN_ONCE = "run_once"
    RUN_ALL = "run_all"
    SKIP = "skip"


class LogStream(StrEnum):
    STDOUT = "stdout"
    STDERR = "stderr"
    LOG = "log"
    SYSTEM = "system"


@dataclass(slots=True)
class Claim:
    """A run a worker holds, with what it needs from its job to execute it."""

    id: int
    due_at: datetime
    attempt: int
    job_id: int
    owner_id: int
    slot_at: datetime
    started_at: datetime
    executor: ExecutorKind
    task: str | None
    payload: dict[str, Any]
    message: str | None
    timeout: timedelta
    max_attempts: int
    backoff_base: timedelta
    backoff_max: timedelta
    overlap: OverlapPolicy = OverlapPolicy.ALLOW

    @property
    def key(self) -> RunKey:
        return RunKey(self.id, self.due_at, self.attempt)


@dataclass(frozen=True, slots=True)
class RunKey:
    """What fences a run's writes, with the worker id: its identity and attempt."""

    id: int
    due_at: datetime
    attempt: int


@dataclass(frozen=True, slots=True)
class LogLine:
    seq: int
    at: datetime
    stream: LogStream
    line: str


@dataclass(frozen=True, slots=True)
class Completion:
    """The outcome of one execution; retry_in is set when a next attempt is due."""

    key: RunKey
    state: RunState
    error: str | None
    retry_in: timedelta | None
    logs: tuple[LogLine, ...] = ()
