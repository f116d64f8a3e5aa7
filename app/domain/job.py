"""A job as a user asks for it: schedule, executor, policies; validated without I/O."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from app.domain.models import ExecutorKind, MisfirePolicy, OverlapPolicy
from app.domain.retry import RetryPolicy
from app.domain.schedule import Schedule
from app.errors import ValidationError

ECHO_TASK = "pgsched.echo"
HTTP_METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})
MAX_TIMEOUT = timedelta(days=1)
PRIORITY_RANGE = range(-100, 101)


@dataclass(frozen=True)
class JobSpec:
    schedule: Schedule
    executor: ExecutorKind
    retry: RetryPolicy
    task: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    message: str | None = None
    name: str = ""
    timeout: timedelta = timedelta(minutes=1)
    priority: int = 0
    overlap: OverlapPolicy = OverlapPolicy.ALLOW
    misfire: MisfirePolicy = MisfirePolicy.RUN_ONCE
    starting_deadline: timedelta | None = None
    idempotency_key: str | None = None
    notify_url: str | None = None
    notify_on_success: bool = False
    notify_on_failure: bool = False

    def __post_init__(self) -> None:
        for name in ("name", "message", "task", "idempotency_key", "notify_url"):
            value = getattr(self, name)
            if isinstance(value, str) and "\x00" in value:
                raise ValidationError(f"{name} must not contain NUL characters", field=name)
        if not timedelta(0) < self.timeout <= MAX_TIMEOUT:
            raise ValidationError("timeout must be between 0 and 86400 seconds", field="timeout")
        if self.priority not in PRIORITY_RANGE:
            raise ValidationError("priority must be between -100 and 100", field="priority")
        if self.starting_deadline is not None and self.starting_deadline <= timedelta(0):
            raise ValidationError("starting_deadline must be positive", field="starting_deadline")
        if self.notify_url is not None:
            _check_url(self.notify_url, "notify_url")
        _CHECKS[self.executor](self)


def executor_of(
    *,
    http: dict[str, Any] | None = None,
    shell: str | None = None,
    task: str | None = None,
    args: dict[str, Any] | None = None,
) -> tuple[ExecutorKind, str | None, dict[str, Any]]:
    """(executor, task, payload) for what a job runs; a job that names nothing runs the
    built-in echo task (the seed API's message-only jobs)."""
    if sum(x is not None for x in (http, shell, task)) > 1:
        raise ValidationError("give one of http, shell, task", field="executor")
    if shell is not None:
        return ExecutorKind.SHELL, None, {"command": shell}
    if http is not None:
        return ExecutorKind.HTTP, None, {k: v for k, v in http.items() if v is not None}
    return ExecutorKind.PYTHON, task or ECHO_TASK, {"args": args} if args else {}


def _check_url(url: object, field: str) -> None:
    if not isinstance(url, str) or urlsplit(url).scheme not in {"http", "https"}:
        raise ValidationError(f"{field} must be an http(s) url", field=field)
    if not urlsplit(url).hostname:
        raise ValidationError(f"{field} has no host", field=field)


def _check_python(spec: JobSpec) -> None:
    if not spec.task:
        raise ValidationError("a python job needs a task name", field="task")


def _check_http(spec: JobSpec) -> None:
    _check_url(spec.payload.get("url"), "url")
    method = str(spec.payload.get("method", "POST")).upper()
    if method not in HTTP_METHODS:
        raise ValidationError(f"method must be one of {sorted(HTTP_METHODS)}", field="method")
    headers = spec.payload.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ValidationError("headers must be an object of strings", field="headers")


def _check_shell(spec: JobSpec) -> None:
    command = spec.payload.get("command")
    if not isinstance(command, str) or not command.strip():
        raise ValidationError("a shell job needs a command", field="command")


_CHECKS = {
    ExecutorKind.PYTHON: _check_python,
    ExecutorKind.HTTP: _check_http,
    ExecutorKind.SHELL: _check_shell,
}


def edited(
    spec: JobSpec,
    *,
    schedule: Schedule | None = None,
    message: str | None = None,
    name: str | None = None,
    priority: int | None = None,
    timeout: timedelta | None = None,
    max_attempts: int | None = None,
    overlap: OverlapPolicy | None = None,
    misfire: MisfirePolicy | None = None,
    starting_deadline: timedelta | None = None,
    notify_url: str | None = None,
) -> JobSpec:
    """`spec` with the given fields changed (None keeps a field), validated again."""
    changes: dict[str, Any] = {
        key: value
        for key, value in {
            "schedule": schedule,
            "message": message,
            "name": name,
            "priority": priority,
            "timeout": timeout,
            "overlap": overlap,
            "misfire": misfire,
            "starting_deadline": starting_deadline,
            "notify_url": notify_url,
        }.items()
        if value is not None
    }
    if max_attempts is not None:
        changes["retry"] = dataclasses.replace(spec.retry, max_attempts=max_attempts)
    return dataclasses.replace(spec, **changes)
