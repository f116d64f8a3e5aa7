"""Settings: one frozen dataclass read from PGSCHED_* variables; no global instance."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from app.errors import SettingsError

ENV_PREFIX = "PGSCHED_"


def _default_data_dir() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pgsched"


def _bool(raw: str) -> bool:
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off", ""}:
        return False
    raise ValueError(f"expected a boolean (true/false), got {raw!r}")


def _seconds(raw: str) -> timedelta:
    value = float(raw)
    if value < 0:
        raise ValueError("must not be negative")
    return timedelta(seconds=value)


def _positive_int(raw: str) -> int:
    value = int(raw)
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _list(raw: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in raw.split(",") if part.strip())


_PARSERS: dict[type | str, Callable[[str], Any]] = {
    "bool": _bool,
    "timedelta": _seconds,
    "int": _positive_int,
    "int | None": _positive_int,
    "float": float,
    "str": str,
    "str | None": str,
    "Path": Path,
    "tuple[str, ...]": _list,
}


@dataclasses.dataclass(frozen=True)
class Settings:
    """Every knob of a pgsched process. Durations are `*_SECONDS` in the environment."""

    database_url: str | None = None
    data_dir: Path = dataclasses.field(default_factory=_default_data_dir)
    log_level: str = "info"
    log_json: bool | None = None  # None: JSON when stderr is not a TTY

    pool_max: int = 10

    # Worker
    concurrency: int = 10
    claim_batch_max: int = 1000
    lease: timedelta = timedelta(seconds=30)
    heartbeat_interval: timedelta = timedelta(seconds=5)
    poll_interval: timedelta = timedelta(seconds=5)
    shutdown_grace: timedelta = timedelta(seconds=10)
    shell_enabled: bool = False
    imports: tuple[str, ...] = ()
    max_log_lines: int = 1000
    max_log_line_bytes: int = 4096
    metrics_host: str = "127.0.0.1"
    metrics_port: int | None = None  # a worker serves /metrics here when set

    # Planner
    plan_horizon: timedelta = timedelta(minutes=10)
    plan_interval: timedelta = timedelta(seconds=5)
    plan_batch: int = 1000
    misfire_threshold: timedelta = timedelta(minutes=1)

    # Maintainer (leader-only duties)
    leader_ttl: timedelta = timedelta(seconds=15)
    reclaim_interval: timedelta = timedelta(seconds=5)
    partition_minutes: int = 60
    partition_premake: timedelta = timedelta(days=1)
    retention: timedelta = timedelta(days=7)
    keeper_interval: timedelta = timedelta(minutes=5)

    # Notifications
    notify_interval: timedelta = timedelta(seconds=0.5)

    # API
    api_host: str = "127.0.0.1"
    api_port: int = 8080
    secret_key: str | None = None  # signs access tokens; generated and stored if unset
    access_token_ttl: timedelta = timedelta(minutes=15)
    refresh_token_ttl: timedelta = timedelta(days=30)
    signup_enabled: bool = True
    max_body_bytes: int = 1_048_576
    cors_origins: tuple[str, ...] = ()

    # Retry defaults for jobs that do not say
    max_attempts: int = 3
    backoff_base: timedelta = timedelta(seconds=1)
    backoff_max: timedelta = timedelta(hours=1)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Settings:
        """Read every field from its PGSCHED_ twin; a bad value names its variable."""
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            name = env_name(field.name)
            raw = environ.get(name)
            if raw is None or (raw == "" and field.name != "database_url"):
                continue
            values[field.name] = _parse(field, raw, name)
        if values.get("database_url") == "":
            values["database_url"] = None
        return cls(**values).validated()

    def with_overrides(self, **overrides: Any) -> Settings:
        """Apply CLI flags (None means 'not given') and re-validate."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(self, **given).validated()

    def validated(self) -> Settings:
        if self.heartbeat_interval >= self.lease:
            raise SettingsError(
                f"{env_name('heartbeat_interval')} must be shorter than {env_name('lease')}"
            )
        if self.backoff_max > self.partition_premake / 2:
            raise SettingsError(
                f"{env_name('backoff_max')} must be at most half of "
                f"{env_name('partition_premake')}: retries must land in an existing partition"
            )
        if self.plan_horizon > self.partition_premake / 2:
            raise SettingsError(
                f"{env_name('plan_horizon')} must be at most half of "
                f"{env_name('partition_premake')}"
            )
        if self.log_level.lower() not in {"debug", "info", "warning", "error"}:
            raise SettingsError(f"{env_name('log_level')} must be debug, info, warning or error")
        return self


def env_name(field_name: str) -> str:
    suffix = "_SECONDS" if _is_duration(field_name) else ""
    return f"{ENV_PREFIX}{field_name.upper()}{suffix}"


def _is_duration(field_name: str) -> bool:
    fields = {f.name: f for f in dataclasses.fields(Settings)}
    return str(fields[field_name].type) == "timedelta"


def _parse(field: dataclasses.Field[Any], raw: str, name: str) -> Any:
    type_name = str(field.type).replace("bool | None", "bool")
    parser = _PARSERS.get(type_name)
    if parser is None:  # pragma: no cover - a new field type without a parser
        raise SettingsError(f"{name}: no parser for type {type_name}")
    try:
        return parser(raw)
    except ValueError as exc:
        raise SettingsError(f"{name}: {exc}") from None
