"""Schedules: when a job's slots fire (once, cron in an IANA zone, or a fixed interval)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from app.domain.models import ScheduleKind
from app.errors import InvalidScheduleError

# Postgres timestamptz spans 4713 BC to 294276 AD, Python 1..9999; a scheduler has no
# business with either end, and these bounds keep every slot representable in both.
MIN_TIME = datetime(1970, 1, 1, tzinfo=UTC)
MAX_TIME = datetime(9000, 1, 1, tzinfo=UTC)
MIN_INTERVAL = timedelta(seconds=1)


def zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidScheduleError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin'",
            field="timezone",
        ) from None


def require_aware(when: datetime, field: str) -> datetime:
    if when.tzinfo is None or when.utcoffset() is None:
        raise InvalidScheduleError(
            f"{field} needs a UTC offset or 'Z' (e.g. 2030-01-01T09:00:00+01:00)", field=field
        )
    utc = when.astimezone(UTC)
    if not MIN_TIME <= utc < MAX_TIME:
        raise InvalidScheduleError(
            f"{field} must be between {MIN_TIME:%Y} and {MAX_TIME:%Y}", field=field
        )
    return utc


@dataclass(frozen=True)
class Schedule:
    kind: ScheduleKind
    timezone: str = "UTC"
    execute_at: datetime | None = None
    cron: str | None = None
    interval: timedelta | None = None
    anchor: datetime | None = None

    @classmethod
    def once(cls, execute_at: datetime, timezone: str = "UTC") -> Schedule:
        zone(timezone)
        return cls(ScheduleKind.ONCE, timezone, execute_at=require_aware(execute_at, "execute_at"))

    @classmethod
    def cron_expr(cls, expr: str, timezone: str = "UTC") -> Schedule:
        tz = zone(timezone)
        expr = " ".join(expr.split())
        fields = expr.split(" ")
        if not expr.startswith("@") and len(fields) not in (5, 6):
            raise InvalidScheduleError(
                f"cron {expr!r} must have 5 fields (or 6 with leading seconds)", field="cron"
            )
        schedule = cls(ScheduleKind.CRON, timezone, cron=expr)
        try:
            if not croniter.is_valid(expr, second_at_beginning=True):
                raise InvalidScheduleError(f"cron {expr!r} is not valid", field="cron")
            # An expression that never fires (e.g. 0 0 31 2 *) is only found by searching.
            schedule._iter(datetime.now(tz)).get_next(datetime)
        except (CroniterBadCronError, CroniterBadDateError, ValueError, KeyError):
            raise InvalidScheduleError(
                f"cron {expr!r} never fires or is not valid", field="cron"
            ) from None
        return schedule

    @classmethod
    def every(cls, interval: timedelta, anchor: datetime, timezone: str = "UTC") -> Schedule:
        zone(timezone)
        if interval < MIN_INTERVAL:
            raise InvalidScheduleError("interval must be at least 1 second", field="interval")
        return cls(
            ScheduleKind.INTERVAL,
            timezone,
            interval=interval,
            anchor=require_aware(anchor, "anchor"),
        )

    @classmethod
    def from_parts(
        cls,
        *,
        execute_at: datetime | None,
        cron: str | None,
        interval: timedelta | None,
        timezone: str,
        now: datetime,
    ) -> Schedule | None:
        """The schedule a request names with at most one of a time, a cron expression or
        an interval (anchored at `now`); None when it names none."""
        if sum(x is not None for x in (execute_at, cron, interval)) > 1:
            raise InvalidScheduleError(
                "give one schedule: a time, a cron expression or an interval", field="schedule"
            )
        if cron is not None:
            return cls.cron_expr(cron, timezone)
        if interval is not None:
            return cls.every(interval, now, timezone)
        if execute_at is not None:
            return cls.once(execute_at, timezone)
        return None

    def _iter(self, start: datetime) -> croniter:
        assert self.cron is not None
        return croniter(self.cron, start, second_at_beginning=True)

    def first_slot(self, not_before: datetime) -> datetime | None:
        """The first slot at or after `not_before`; a one-off job's slot even if late."""
        if self.kind is ScheduleKind.ONCE:
            return self.execute_at
        return self.next_slot(not_before - timedelta(microseconds=1))

    def next_slot(self, after: datetime) -> datetime | None:
        """The first slot strictly after `after`, in UTC; None when there is none."""
        if self.kind is ScheduleKind.ONCE:
            assert self.execute_at is not None
            return self.execute_at if self.execute_at > after else None
        if self.kind is ScheduleKind.INTERVAL:
            assert self.interval is not None and self.anchor is not None
            if after < self.anchor:
                return self.anchor
            steps = (after - self.anchor) // self.interval + 1
            slot = self.anchor + self.interval * steps
            return slot if slot < MAX_TIME else None
        return self._next_cron(after)

    def _next_cron(self, after: datetime) -> datetime | None:
        """Cron is matched in local wall time, then mapped to UTC:
        - a wall time inside a spring-forward gap fires once, at the first valid instant
          after the gap (several gap slots collapse into that one);
        - a wall time that happens twice (fall back) fires once, at its first occurrence;
        and the result is always strictly after `after`."""
        tz = zone(self.timezone)
        wall = after.astimezone(tz).replace(tzinfo=None)
        iterator = self._iter(wall)
        for _ in range(MAX_CRON_STEPS):
            try:
                candidate: datetime = iterator.get_next(datetime)
            except CroniterBadDateError:
                return None
            fired = wall_to_utc(candidate, tz)
            if fired > after:
                return fired if fired < MAX_TIME else None
        return None  # pragma: no cover - more than a day of slots inside one DST shift


# A fall-back hour can hold 3600 second-level slots that precede `after` in UTC.
MAX_CRON_STEPS = 10_000


def wall_to_utc(wall: datetime, tz: ZoneInfo) -> datetime:
    """The UTC instant of a local wall time: its first occurrence if it happens twice,
    the end of the gap if it never happens."""
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    if first.astimezone(tz).replace(tzinfo=None) == wall:
        return first
    # In a gap: fold=1 reads the wall time with the later offset, fold=0 with the
    # earlier one; the transition lies between the two readings. Find it to the second.
    lo = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    hi = first
    if lo > hi:
        lo, hi = hi, lo
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(tz).replace(tzinfo=None) > wall:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0) if hi.microsecond else hi
