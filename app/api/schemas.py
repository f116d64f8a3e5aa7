"""Request and response bodies of the REST API (msgspec Structs: validated on the way in,
described in the OpenAPI document on the way out)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

import msgspec
from msgspec import Meta

T = TypeVar("T")

Username = Annotated[str, Meta(min_length=1, max_length=100)]
Password = Annotated[str, Meta(min_length=8, max_length=1024)]
Weight = Annotated[float, Meta(gt=0, le=10_000)]
Text = Annotated[str, Meta(max_length=10_000)]
ShortText = Annotated[str, Meta(max_length=500)]
Seconds = Annotated[float, Meta(gt=0, le=86_400)]
Priority = Annotated[int, Meta(ge=-100, le=100)]
Attempts = Annotated[int, Meta(ge=1, le=100)]


class Envelope(msgspec.Struct, Generic[T]):
    data: T
    success: bool = True


class ErrorDetail(msgspec.Struct):
    code: str
    message: str
    details: Any = None


class ErrorEnvelope(msgspec.Struct):
    error: ErrorDetail
    success: bool = False


# -- accounts ----------------------------------------------------------------------------


class UserIn(msgspec.Struct, forbid_unknown_fields=True):
    username: Username
    password: Password
    job_weight: Weight = 1.0


class LoginIn(msgspec.Struct):
    username: Username
    password: Annotated[str, Meta(max_length=1024)]


class RefreshIn(msgspec.Struct):
    refresh_token: Annotated[str, Meta(max_length=200)] | None = None


class UserOut(msgspec.Struct):
    id: int
    username: str
    job_weight: float
    is_admin: bool = False
    shell_allowed: bool = False


class MeOut(msgspec.Struct):
    id: int
    username: str
    job_weight: float
    is_admin: bool
    shell_allowed: bool
    webhook_secret: str | None


class LoginOut(msgspec.Struct):
    expire: datetime
    token: str
    refresh_token: str
    user: UserOut


class TokenOut(msgspec.Struct):
    expire: datetime
    token: str
    refresh_token: str


class AdminUserPatch(msgspec.Struct, forbid_unknown_fields=True):
    job_weight: Weight | None = None
    is_admin: bool | None = None
    shell_allowed: bool | None = None


class ApiKeyIn(msgspec.Struct, forbid_unknown_fields=True):
    name: Annotated[str, Meta(min_length=1, max_length=100)]


class ApiKeyOut(msgspec.Struct):
    id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None


class ApiKeyCreated(msgspec.Struct):
    id: int
    name: str
    prefix: str
    created_at: datetime
    key: str  # shown once; only its hash is stored


# -- jobs --------------------------------------------------------------------------------


class HttpIn(msgspec.Struct, forbid_unknown_fields=True):
    url: Annotated[str, Meta(max_length=2048)]
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"] = "POST"
    headers: dict[Annotated[str, Meta(max_length=200)], ShortText] = {}
    body: Any = None


class JobIn(msgspec.Struct, forbid_unknown_fields=True):
    """A job: a schedule (execute_at, cron or interval_seconds), what to run (http,
    shell, or a python task; a bare message runs the built-in echo), and policies."""

    message: Text | None = None
    execute_at: datetime | None = None
    cron: ShortText | None = None
    interval_seconds: Annotated[float, Meta(ge=1, le=31_536_000)] | None = None
    timezone: Annotated[str, Meta(max_length=100)] = "UTC"
    http: HttpIn | None = None
    shell: Text | None = None
    task: ShortText | None = None
    args: dict[str, Any] | None = None
    name: ShortText = ""
    timeout_seconds: Seconds = 60.0
    max_attempts: Attempts | None = None
    backoff_base_seconds: Seconds | None = None
    backoff_max_seconds: Seconds | None = None
    priority: Priority = 0
    overlap: Literal["allow", "forbid", "replace"] = "allow"
    misfire: Literal["run_once", "run_all", "skip"] = "run_once"
    starting_deadline_seconds: Seconds | None = None
    notify_url: Annotated[str, Meta(max_length=2048)] | None = None
    notify_on: list[Literal["success", "failure"]] = msgspec.field(
        default_factory=lambda: ["success", "failure"]
    )


class JobPatch(msgspec.Struct, forbid_unknown_fields=True):
    """Fields to change; a new schedule replaces the old one."""

    message: Text | None = None
    execute_at: datetime | None = None
    cron: ShortText | None = None
    interval_seconds: Annotated[float, Meta(ge=1, le=31_536_000)] | None = None
    timezone: Annotated[str, Meta(max_length=100)] | None = None
    name: ShortText | None = None
    timeout_seconds: Seconds | None = None
    max_attempts: Attempts | None = None
    priority: Priority | None = None
    overlap: Literal["allow", "forbid", "replace"] | None = None
    misfire: Literal["run_once", "run_all", "skip"] | None = None
    starting_deadline_seconds: Seconds | None = None
    notify_url: Annotated[str, Meta(max_length=2048)] | None = None


class JobOut(msgspec.Struct):
    id: int
    user_id: int
    message: str | None
    status: str
    execute_at: datetime | None
    name: str
    state: str
    schedule_kind: str
    cron: str | None
    interval_seconds: float | None
    timezone: str
    executor: str
    task: str | None
    timeout_seconds: float
    max_attempts: int
    priority: int
    overlap: str
    misfire: str
    starting_deadline_seconds: float | None
    next_run_at: datetime | None
    notify_url: str | None
    notify_on_success: bool
    notify_on_failure: bool
    last_run_state: str | None
    created_at: datetime
    updated_at: datetime
    shard_id: int = 0  # seed-API field; pgsched has no shards


class RunOut(msgspec.Struct):
    id: int
    job_id: int
    slot_at: datetime
    due_at: datetime
    attempt: int
    state: str
    worker_id: str | None
    started_at: datetime | None
    finished_at: datetime | None
    error: str | None
    dead: bool


class LogOut(msgspec.Struct):
    seq: int
    at: datetime
    stream: str
    line: str


class CancelOut(msgspec.Struct):
    job_id: int
    queued_cancelled: int
    running_signalled: int


class NotificationOut(msgspec.Struct):
    id: int
    run_id: int
    event: str
    url: str
    state: str
    attempts: int
    last_status: int | None
    last_error: str | None
    history: list[dict[str, Any]]
    created_at: datetime
    delivered_at: datetime | None


class Health(msgspec.Struct):
    status: str
    detail: str = ""


def out(struct: type[T], row: dict[str, Any]) -> T:
    """A response struct from a database row (extra columns are ignored)."""
    return msgspec.convert(row, struct, from_attributes=False, strict=False)


def _error_responses() -> dict[int, Any]:
    from litestar.openapi.datastructures import ResponseSpec

    reasons = {
        400: "Invalid input: the message names the field",
        401: "Missing, invalid or expired credentials",
        403: "Not allowed",
        404: "Not found (also another user's resource)",
        409: "Conflicts with the current state",
        413: "Request body too large",
        503: "Database unavailable",
    }
    return {
        code: ResponseSpec(ErrorEnvelope, description=text, generate_examples=False)
        for code, text in reasons.items()
    }


ERRORS = _error_responses()
