"""Next-slot computation against hand-worked expectations: DST in both directions in
New York and Berlin, Lord Howe's 30-minute shift, Feb 29, month ends, seconds."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.domain.schedule import Schedule


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def slots(expr: str, tz: str, after: str, n: int) -> list[str]:
    schedule = Schedule.cron_expr(expr, tz)
    out, cursor = [], _utc(after)
    for _ in range(n):
        nxt = schedule.next_slot(cursor)
        assert nxt is not None
        out.append(nxt.isoformat().replace("+00:00", "Z"))
        cursor = nxt
    return out


CASES = [
    # New York springs forward 2026-03-08 02:00 EST -> 03:00 EDT: 02:30 does not exist
    # and runs once at 03:00 EDT (07:00Z), the first valid instant after the gap.
    (
        "30 2 * * *",
        "America/New_York",
        "2026-03-07T12:00Z",
        ["2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"],
    ),
    # Half-hourly across the gap: 02:00 and 02:30 collapse into one run at 03:00 EDT.
    (
        "*/30 * * * *",
        "America/New_York",
        "2026-03-08T06:00Z",
        ["2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"],
    ),
    # New York falls back 2026-11-01 02:00 EDT -> 01:00 EST: 01:30 happens twice and
    # fires once, at its first occurrence (EDT, 05:30Z).
    (
        "30 1 * * *",
        "America/New_York",
        "2026-10-31T12:00Z",
        ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
    ),
    # Half-hourly through the repeated hour: 01:00 and 01:30 once each, then 02:00 EST.
    (
        "*/30 * * * *",
        "America/New_York",
        "2026-11-01T04:45Z",
        ["2026-11-01T05:00:00Z", "2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"],
    ),
    # Berlin springs forward 2026-03-29 02:00 CET -> 03:00 CEST: 02:15 runs at 03:00 CEST.
    (
        "15 2 * * *",
        "Europe/Berlin",
        "2026-03-28T12:00Z",
        ["2026-03-29T01:00:00Z", "2026-03-30T00:15:00Z"],
    ),
    # Berlin falls back 2026-10-25 03:00 CEST -> 02:00 CET: 02:15 fires once (CEST).
    (
        "15 2 * * *",
        "Europe/Berlin",
        "2026-10-24T12:00Z",
        ["2026-10-25T00:15:00Z", "2026-10-26T01:15:00Z"],
    ),
    # Lord Howe shifts by 30 minutes: 2026-10-04 02:00 -> 02:30 (+10:30 -> +11:00).
    (
        "0 2 * * *",
        "Australia/Lord_Howe",
        "2026-10-03T00:00Z",
        ["2026-10-03T15:30:00Z", "2026-10-04T15:00:00Z"],
    ),
    # ... and back on 2027-04-04 02:00 -> 01:30: 01:45 happens twice, fires once (+11:00).
    (
        "45 1 * * *",
        "Australia/Lord_Howe",
        "2027-04-03T00:00Z",
        ["2027-04-03T14:45:00Z", "2027-04-04T15:15:00Z"],
    ),
    # Feb 29 only in leap years.
    ("0 0 29 2 *", "UTC", "2026-01-01T00:00Z", ["2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"]),
    # Day 31 skips the short months; L is the last day of every month.
    ("0 12 31 * *", "UTC", "2026-04-01T00:00Z", ["2026-05-31T12:00:00Z", "2026-07-31T12:00:00Z"]),
    (
        "0 12 L * *",
        "UTC",
        "2026-01-15T00:00Z",
        ["2026-01-31T12:00:00Z", "2026-02-28T12:00:00Z", "2026-03-31T12:00:00Z"],
    ),
    # A leading seconds field, and an alias.
    (
        "*/20 * * * * *",
        "UTC",
        "2026-05-01T00:00:05Z",
        ["2026-05-01T00:00:20Z", "2026-05-01T00:00:40Z", "2026-05-01T00:01:00Z"],
    ),
    ("@hourly", "Asia/Kolkata", "2026-05-01T00:10Z", ["2026-05-01T00:30:00Z"]),
]


@pytest.mark.parametrize(("expr", "tz", "after", "expected"), CASES)
def test_next_slots(expr: str, tz: str, after: str, expected: list[str]) -> None:
    assert slots(expr, tz, after, len(expected)) == expected


def test_one_off_accepts_any_offset() -> None:
    a = Schedule.once(datetime.fromisoformat("2030-01-01T09:00:00+05:30"))
    b = Schedule.once(datetime.fromisoformat("2030-01-01T03:30:00Z"))
    assert a.execute_at == b.execute_at
