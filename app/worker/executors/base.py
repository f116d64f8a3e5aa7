"""What every executor shares: the run's context, bounded log capture, failure signals."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from app.clock import Clock
from app.domain.models import Claim, LogLine, LogStream


class RetryableError(Exception):
    """Raise from a task to fail this attempt and let the retry policy try again."""


class FatalError(Exception):
    """Raise from a task to fail without retrying (the input can never succeed)."""


class RunLog:
    """Captured output of one execution, bounded in lines and line length so one noisy
    job cannot flood the database; what is cut is said in a last system line."""

    def __init__(self, clock: Clock, *, max_lines: int, max_line_bytes: int) -> None:
        self._clock = clock
        self._max_lines = max_lines
        self._max_line_bytes = max_line_bytes
        self._lines: list[LogLine] = []
        self._dropped = 0

    def write(self, stream: LogStream, text: str) -> None:
        for raw in text.splitlines() or [""]:
            if len(self._lines) >= self._max_lines:
                self._dropped += 1
                continue
            line = raw.replace("\x00", "\ufffd")
            encoded = line.encode()
            if len(encoded) > self._max_line_bytes:
                line = encoded[: self._max_line_bytes].decode(errors="ignore") + " …[truncated]"
            self._lines.append(LogLine(len(self._lines) + 1, self._clock.now(), stream, line))

    def lines(self) -> tuple[LogLine, ...]:
        if not self._dropped:
            return tuple(self._lines)
        note = LogLine(
            len(self._lines) + 1,
            self._clock.now(),
            LogStream.SYSTEM,
            f"{self._dropped} more lines dropped (limit {self._max_lines} lines per run)",
        )
        return (*self._lines, note)


@dataclass
class TaskContext:
    """What a python task receives: which run this is, its input, and a log."""

    run_id: int
    attempt: int
    job_id: int
    slot_at: datetime
    payload: dict[str, Any]
    message: str | None
    log: RunLog = field(repr=False)

    @property
    def args(self) -> dict[str, Any]:
        args = self.payload.get("args", {})
        return args if isinstance(args, dict) else {}

    def info(self, text: str) -> None:
        self.log.write(LogStream.LOG, text)


class Executor(Protocol):
    async def execute(self, claim: Claim, ctx: TaskContext) -> None:
        """Return on success; raise RetryableError/FatalError (or anything) on failure.
        Must end promptly when cancelled, leaving nothing running behind."""
