"""Business hours: ``is_open`` and ``next_opening`` in local wall-clock time, across clock changes."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from switchboard.handoff.hours import BusinessHours, opening_words, waiting_reply
from switchboard.tenant_settings import WEEKDAYS, HoursSettings, OpeningPeriod, tenant_settings_from

MADRID = "Europe/Madrid"
ZONES = (
    "Europe/Madrid",
    "America/New_York",
    "America/Santiago",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "UTC",
)
"""Zones with a spring-forward and a fall-back (Lord Howe moves by 30 minutes, Santiago at midnight)."""
CHANGES = {
    "Europe/Madrid": [datetime(2026, 3, 29, 1, tzinfo=UTC), datetime(2026, 10, 25, 1, tzinfo=UTC)],
    "America/New_York": [datetime(2026, 3, 8, 7, tzinfo=UTC), datetime(2026, 11, 1, 6, tzinfo=UTC)],
    "America/Santiago": [datetime(2026, 4, 5, 3, tzinfo=UTC), datetime(2026, 9, 6, 4, tzinfo=UTC)],
    "Australia/Lord_Howe": [datetime(2026, 4, 4, 15, tzinfo=UTC), datetime(2026, 10, 3, 15, 30, tzinfo=UTC)],
    "Asia/Kolkata": [datetime(2026, 6, 1, tzinfo=UTC)],
    "UTC": [datetime(2026, 6, 1, tzinfo=UTC)],
}


def hours(
    periods: list[tuple[str, str, str]], *, zone: str = MADRID, holidays: tuple[date, ...] = ()
) -> BusinessHours:
    settings_ = HoursSettings(
        enabled=True,
        timezone=zone,
        schedule=[OpeningPeriod(day=d, opens=o, closes=c) for d, o, c in periods],  # type: ignore[arg-type]
        holidays=list(holidays),
    )
    return BusinessHours.from_settings(settings_)


def local(zone: str, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=ZoneInfo(zone), fold=fold).astimezone(UTC)  # type: ignore[misc]


WEEKDAY_NINE_TO_SIX = [(d, "09:00", "18:00") for d in WEEKDAYS[:5]]


def test_a_weekday_schedule_is_open_inside_and_closed_outside():
    week = hours(WEEKDAY_NINE_TO_SIX)
    assert week.is_open(local(MADRID, 2026, 12, 7, 9, 0))  # Monday 09:00 local
    assert week.is_open(local(MADRID, 2026, 12, 7, 17, 59))
    assert not week.is_open(local(MADRID, 2026, 12, 7, 18, 0))
    assert not week.is_open(local(MADRID, 2026, 12, 12, 11, 0))  # Saturday
    assert week.next_opening(local(MADRID, 2026, 12, 11, 18, 30)) == local(MADRID, 2026, 12, 14, 9, 0)
    assert week.next_opening(local(MADRID, 2026, 12, 8, 10, 0)) == local(MADRID, 2026, 12, 8, 10, 0)


def test_holidays_close_the_whole_local_day():
    week = hours(WEEKDAY_NINE_TO_SIX, holidays=(date(2026, 12, 24), date(2026, 12, 25)))
    assert not week.is_open(local(MADRID, 2026, 12, 24, 12, 0))
    assert week.next_opening(local(MADRID, 2026, 12, 23, 19, 0)) == local(MADRID, 2026, 12, 28, 9, 0)


def test_an_opening_in_the_skipped_hour_opens_when_the_clocks_jump():
    # Madrid, 29 March 2026: 02:00 CET becomes 03:00 CEST (01:00 UTC)
    night = hours([("sun", "02:30", "05:00")])
    assert night.next_opening(local(MADRID, 2026, 3, 29, 0, 0)) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_a_period_in_the_repeated_hour_opens_twice():
    # Madrid, 25 October 2026: 03:00 CEST becomes 02:00 CET again (01:00 UTC)
    repeated = hours([("sun", "02:00", "02:30")])
    first = datetime(2026, 10, 25, 0, 0, tzinfo=UTC)  # 02:00 CEST
    assert repeated.next_opening(local(MADRID, 2026, 10, 24, 23, 0)) == first
    assert not repeated.is_open(first + timedelta(minutes=45))
    assert repeated.next_opening(first + timedelta(minutes=45)) == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)


def test_going_back_into_a_period_reopens_it():
    # 01:30-02:15 closes at 02:15 CEST; at 03:00 CEST the clock reads 02:00 CET, inside it again
    back = hours([("sun", "01:30", "02:15")])
    closed = datetime(2026, 10, 25, 0, 20, tzinfo=UTC)
    assert not back.is_open(closed)
    assert back.next_opening(closed) == datetime(2026, 10, 25, 1, 0, tzinfo=UTC)


def test_a_schedule_that_never_opens_gives_none():
    never = hours(
        [("mon", "09:00", "10:00")], holidays=tuple(date(2026, 1, 5) + timedelta(weeks=w) for w in range(60))
    )
    assert never.next_opening(datetime(2026, 1, 1, tzinfo=UTC)) is None


def test_an_instant_without_a_zone_is_refused():
    with pytest.raises(ValueError, match="aware"):
        hours(WEEKDAY_NINE_TO_SIX).is_open(datetime(2026, 12, 7, 9))


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


@st.composite
def periods(draw: st.DrawFn) -> tuple[str, str, str]:
    opens = draw(st.integers(0, 24 * 60 - 1))
    closes = draw(st.integers(opens + 1, 24 * 60))
    return draw(st.sampled_from(WEEKDAYS)), _clock(opens), _clock(closes)


@st.composite
def scenes(draw: st.DrawFn) -> tuple[BusinessHours, datetime]:
    zone = draw(st.sampled_from(ZONES))
    change = draw(st.sampled_from(CHANGES[zone]))
    at = change + timedelta(seconds=draw(st.integers(-3 * 86_400, 3 * 86_400)))
    near = at.astimezone(ZoneInfo(zone)).date()
    holidays = draw(st.lists(st.integers(-2, 9).map(lambda n: near + timedelta(days=n)), max_size=3))
    return hours(draw(st.lists(periods(), min_size=1, max_size=5)), zone=zone, holidays=tuple(holidays)), at


def _first_open_minute(week: BusinessHours, at: datetime, limit: timedelta) -> datetime | None:
    """The answer by brute force: ``at`` itself, else every whole minute after it (openings and clock
    changes fall on whole minutes)."""
    if week.is_open(at):
        return at
    minute = at.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while minute - at <= limit:
        if week.is_open(minute):
            return minute
        minute += timedelta(minutes=1)
    return None


@settings(max_examples=150, deadline=None)
@given(scenes())
def test_next_opening_is_the_first_open_minute_across_clock_changes(scene: tuple[BusinessHours, datetime]):
    week, at = scene
    opening = week.next_opening(at)
    assert opening is not None  # at least one weekly period, at most 3 holidays
    assert opening >= at and week.is_open(opening)
    assert opening == _first_open_minute(week, at, opening - at + timedelta(minutes=1))


@settings(max_examples=100, deadline=None)
@given(scenes(), st.integers(0, 10_000))
def test_is_open_agrees_with_the_local_wall_clock(scene: tuple[BusinessHours, datetime], minutes: int):
    week, at = scene
    instant = at + timedelta(minutes=minutes)
    wall = instant.astimezone(week.zone)
    inside = wall.date() not in week.holidays and any(
        opens <= wall.time().replace(tzinfo=None)
        and (closes is None or wall.time().replace(tzinfo=None) < closes)
        for opens, closes in week.periods.get(wall.weekday(), [])
    )
    assert week.is_open(instant) == inside


def test_the_waiting_reply_names_the_next_opening_in_the_tenants_language():
    now = local(MADRID, 2026, 12, 11, 19, 0)  # Friday evening
    opening = local(MADRID, 2026, 12, 14, 9, 0)
    settings_ = tenant_settings_from(
        {"locale": {"language": "es", "timezone": MADRID}, "hours": {"enabled": True}}
    )
    text = waiting_reply(settings_, opening, now=now)
    assert "el lunes 14 de diciembre a las 09:00" in text
    assert text == settings_.hours.out_of_hours_reply.replace(
        "{opening}", "el lunes 14 de diciembre a las 09:00"
    )
    assert waiting_reply(settings_, None, now=now) == settings_.handoff.queue_reply
    zone = ZoneInfo(MADRID)
    assert (
        opening_words(local(MADRID, 2026, 12, 11, 20, 0), now=now, zone=zone, language="en")
        == "today at 20:00"
    )
    assert (
        opening_words(local(MADRID, 2026, 12, 12, 9, 0), now=now, zone=zone, language="en")
        == "tomorrow at 09:00"
    )
    assert opening_words(opening, now=now, zone=zone, language="en") == "on Monday 14 December at 09:00"
