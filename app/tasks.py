"""The public API for python tasks: `from app.tasks import task, TaskContext`."""

from app.worker.executors import builtin as _builtin  # noqa: F401  (registers built-ins)
from app.worker.executors.base import FatalError, RetryableError, TaskContext
from app.worker.executors.python import REGISTRY, task

__all__ = ["REGISTRY", "FatalError", "RetryableError", "TaskContext", "task"]
