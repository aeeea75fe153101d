"""``describe_heartbeat``: ARQ's health line, whose stamp has no year and no time zone, shown as an age."""

from __future__ import annotations

from datetime import datetime

from switchboard.runtime.supervisor import describe_heartbeat

LINE = "Dec-03 15:00:00 j_complete=4 j_failed=0 j_retried=0 j_ongoing=0 queued=2"


def test_the_stamp_becomes_an_age_and_the_counters_stay() -> None:
    assert describe_heartbeat(LINE, now=datetime(2026, 12, 3, 15, 0, 7)) == (
        "heartbeat 7 s ago: j_complete=4 j_failed=0 j_retried=0 j_ongoing=0 queued=2"
    )


def test_a_line_from_december_read_in_january_is_seconds_old_not_a_year_ahead() -> None:
    line = "Dec-31 23:59:58 j_complete=1"
    assert describe_heartbeat(line, now=datetime(2027, 1, 1, 0, 0, 1)) == "heartbeat 3 s ago: j_complete=1"


def test_a_clock_a_little_behind_the_worker_shows_zero_not_a_negative_age() -> None:
    assert describe_heartbeat(LINE, now=datetime(2026, 12, 3, 14, 59, 58)).startswith("heartbeat 0 s ago: ")


def test_a_line_in_another_shape_is_shown_as_it_is() -> None:
    for line in ("", "j_complete=1", "not-a-date 12:00:00 j_complete=1", "Dec-03"):
        assert describe_heartbeat(line, now=datetime(2026, 12, 3)) == line
