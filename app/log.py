"""structlog set-up, once per process; JSON lines unless a person is watching."""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

import structlog

from app.settings import Settings

# Keys whose values must never reach a log line, whatever the caller passes.
_SECRET_KEYS = frozenset({"password", "token", "authorization", "secret", "api_key", "dsn"})


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in event.keys() & _SECRET_KEYS:
        event[key] = "***"
    return event


def configure_logging(settings: Settings) -> None:
    level = logging.getLevelNamesMapping()[settings.log_level.upper()]
    as_json = settings.log_json if settings.log_json is not None else not sys.stderr.isatty()
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
    # Libraries log through the standard module; keep their noise at warning.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
