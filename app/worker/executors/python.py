"""Python tasks: functions registered with @task("name") in modules the worker imports.

Async tasks are cancelled at their timeout. Blocking tasks run in a thread: Python
cannot kill a thread, so at the timeout the run ends `timed_out` and the thread is
abandoned to finish on its own; use async tasks or the shell executor for work that
must be killed.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from app.domain.models import Claim, LogStream
from app.errors import ValidationError
from app.worker.executors.base import FatalError, TaskContext

Handler = Callable[[TaskContext], Any] | Callable[[TaskContext], Awaitable[Any]]


class TaskRegistry:
    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}

    def register(self, name: str, handler: Handler) -> None:
        if name in self._handlers and self._handlers[name] is not handler:
            raise ValueError(f"task {name!r} is registered twice")
        self._handlers[name] = handler

    def get(self, name: str) -> Handler | None:
        return self._handlers.get(name)

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def require(self, name: str) -> None:
        if name not in self._handlers:
            raise ValidationError(
                f"unknown task {name!r}: known tasks are {', '.join(self.names())}; "
                "import the module that defines it with --import",
                field="task",
            )


REGISTRY = TaskRegistry()


def task(name: str) -> Callable[[Handler], Handler]:
    """Register a function as the python task `name`."""

    def decorator(handler: Handler) -> Handler:
        REGISTRY.register(name, handler)
        return handler

    return decorator


def import_modules(modules: tuple[str, ...]) -> None:
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValidationError(f"cannot import task module {module!r}: {exc}") from None


class PythonExecutor:
    def __init__(self, registry: TaskRegistry) -> None:
        self._registry = registry

    async def execute(self, claim: Claim, ctx: TaskContext) -> None:
        handler = self._registry.get(claim.task or "")
        if handler is None:
            raise FatalError(f"unknown task {claim.task!r} on this worker")
        if inspect.iscoroutinefunction(handler):
            result = await handler(ctx)
        else:
            result = await asyncio.to_thread(handler, ctx)
        if result is not None:
            ctx.log.write(LogStream.LOG, f"result: {result!r}")
