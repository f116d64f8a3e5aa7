"""Pure domain logic: settings, retry policy, schedules, log capture bounds."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from app.clock import FakeClock
from app.domain.models import LogStream, ScheduleKind
from app.domain.retry import RetryPolicy
from app.domain.schedule import Schedule
from app.errors import InvalidScheduleError, SettingsError, ValidationError
from app.settings import Settings
from app.worker.executors.base import RunLog

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_settings_read_every_field_from_its_env_twin() -> None:
    s = Settings.from_env(
        {
            "PGSCHED_DATABASE_URL": "postgresql://x@h/db",
            "PGSCHED_CONCURRENCY": "7",
            "PGSCHED_LEASE_SECONDS": "12.5",
            "PGSCHED_SHELL_ENABLED": "yes",
            "PGSCHED_IMPORTS": "a.b, c",
            "UNRELATED": "1",
        }
    )
    assert s.database_url == "postgresql://x@h/db"
    assert s.concurrency == 7 and s.lease == timedelta(seconds=12.5)
    assert s.shell_enabled is True and s.imports == ("a.b", "c")


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({"PGSCHED_CONCURRENCY": "0"}, "PGSCHED_CONCURRENCY"),
        ({"PGSCHED_LEASE_SECONDS": "soon"}, "PGSCHED_LEASE_SECONDS"),
        ({"PGSCHED_SHELL_ENABLED": "perhaps"}, "PGSCHED_SHELL_ENABLED"),
        ({"PGSCHED_HEARTBEAT_INTERVAL_SECONDS": "60"}, "PGSCHED_HEARTBEAT_INTERVAL_SECONDS"),
        ({"PGSCHED_LOG_LEVEL": "loud"}, "PGSCHED_LOG_LEVEL"),
    ],
)
def test_invalid_settings_name_their_variable(env: dict[str, str], name: str) -> None:
    with pytest.raises(SettingsError, match=name):
        Settings.from_env(env)


def test_backoff_is_exponential_capped_and_jittered_above_its_floor() -> None:
    policy = RetryPolicy(5, timedelta(seconds=1), timedelta(seconds=10))
    assert [policy.ceiling(a).total_seconds() for a in range(1, 6)] == [1, 2, 4, 8, 10]
    rng = random.Random(7)
    delays = [policy.delay(3, rng) for _ in range(200)]
    assert all(policy.min_delay(3) <= d <= policy.ceiling(3) for d in delays)
    assert len(set(delays)) > 100  # jitter spreads a herd of failures
    assert policy.has_attempts_left(4) and not policy.has_attempts_left(5)
    with pytest.raises(ValidationError):
        RetryPolicy(0, timedelta(seconds=1), timedelta(seconds=1))


def test_once_schedule_needs_an_offset_and_a_sane_year() -> None:
    assert Schedule.once(datetime(2030, 1, 1, 9, tzinfo=UTC)).kind is ScheduleKind.ONCE
    with pytest.raises(InvalidScheduleError, match="offset"):
        Schedule.once(datetime(2030, 1, 1, 9))
    for year in (1, 9999):
        with pytest.raises(InvalidScheduleError, match="between"):
            Schedule.once(datetime(year, 1, 1, tzinfo=UTC))


def test_cron_and_interval_slots() -> None:
    every_5 = Schedule.cron_expr("*/5 * * * *")
    assert every_5.next_slot(T0) == T0 + timedelta(minutes=5)
    assert every_5.first_slot(T0) == T0
    seconds = Schedule.cron_expr("*/10 * * * * *")  # leading seconds field
    assert seconds.next_slot(T0) == T0 + timedelta(seconds=10)
    berlin = Schedule.cron_expr("0 9 * * *", "Europe/Berlin")
    assert berlin.next_slot(T0) == datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # 09:00 CET
    interval = Schedule.every(timedelta(seconds=90), T0)
    assert interval.next_slot(T0 + timedelta(seconds=100)) == T0 + timedelta(seconds=180)
    assert interval.first_slot(T0 - timedelta(hours=1)) == T0
    for bad, reason in (("61 * * * *", "cron"), ("0 0 31 2 *", "never fires"), ("* *", "5")):
        with pytest.raises(InvalidScheduleError, match=reason):
            Schedule.cron_expr(bad)
    with pytest.raises(InvalidScheduleError, match="time zone"):
        Schedule.cron_expr("* * * * *", "Mars/Phobos")


def test_run_log_is_bounded_and_says_what_it_dropped() -> None:
    log = RunLog(FakeClock(T0), max_lines=3, max_line_bytes=8)
    log.write(LogStream.STDOUT, "one\ntwo\nthree\nfour\nfive")
    log.write(LogStream.STDERR, "x" * 100)
    lines = log.lines()
    assert [line.line for line in lines[:3]] == ["one", "two", "three"]
    assert lines[-1].stream is LogStream.SYSTEM and "3 more lines dropped" in lines[-1].line
    long = RunLog(FakeClock(T0), max_lines=3, max_line_bytes=8)
    long.write(LogStream.STDOUT, "y" * 100 + "\x00")
    assert long.lines()[0].line == "yyyyyyyy …[truncated]"


def test_readme_documents_every_setting() -> None:
    import dataclasses

    from app.settings import env_name
    from tests.helpers import ROOT

    readme = (ROOT / "README.md").read_text()
    missing = [
        env_name(f.name)
        for f in dataclasses.fields(Settings)
        if f"`{env_name(f.name)}`" not in readme
    ]
    assert missing == []


def test_heartbeat_judges_only_the_runs_it_sent() -> None:
    """A run claimed while a renewal is in flight is not in that renewal's answer and
    must not be taken for lost (it was once, and lost runs were redone needlessly)."""
    from app.domain.models import RunKey
    from app.worker.heartbeat import Heartbeat

    sent_key = RunKey(1, T0, 1)
    new_key = RunKey(2, T0, 1)
    held = {sent_key: 0.0, new_key: 5.0}
    lost: list[RunKey] = []
    beat = Heartbeat(
        "postgresql://unused",
        "w",
        Settings(),
        FakeClock(T0),
        held=lambda: held,
        on_lost=lost.extend,
        on_cancel=lambda ids: None,
        running=lambda: 2,
    )
    beat._apply([sent_key], {1: False}, sent_at=7.0)
    assert lost == [] and held == {sent_key: 7.0, new_key: 5.0}
    beat._apply([sent_key, new_key], {2: False}, sent_at=9.0)
    assert lost == [sent_key]
