"""Maintenance windows (core/window.py), pure: the parser, inside or not, when the window
closes and opens, across the 2026 daylight saving changes of Europe/Berlin (29 March: 02:00
CET -> 03:00 CEST; 25 October: 03:00 CEST -> 02:00 CET)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from gpuops.core import window
from gpuops.errors import InvalidInput

WEEKEND = "Sat 22:00-Sun 06:00 Europe/Berlin"


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def test_a_weekly_window_is_parsed_and_answers_inside_and_closing() -> None:
    w = window.parse("  sat 22:00-SUN   06:00 Europe/Berlin ")
    assert (w.start_day, w.days, w.zone) == (5, 1, "Europe/Berlin")
    # Saturday 14 Nov 2026 (CET, UTC+1): opens 21:00 UTC, closes Sunday 05:00 UTC
    assert not w.contains(utc(2026, 11, 14, 20, 59))
    assert w.closes(utc(2026, 11, 14, 21, 0)) == utc(2026, 11, 15, 5, 0)
    assert w.closes(utc(2026, 11, 15, 4, 59)) == utc(2026, 11, 15, 5, 0)
    assert w.closes(utc(2026, 11, 15, 5, 0)) is None  # the end is outside
    assert w.opens(utc(2026, 11, 15, 5, 0)) == utc(2026, 11, 21, 21, 0)  # next Saturday
    assert w.local(utc(2026, 11, 15, 5, 0)) == "2026-11-15T06:00+01:00"
    assert not w.contains(utc(2026, 11, 18, 12, 0))  # a Wednesday


def test_spring_forward_the_window_keeps_its_wall_clock_hours() -> None:
    """28/29 March 2026: opens Saturday 22:00 CET (21:00 UTC), closes Sunday 06:00 CEST (04:00
    UTC): 7 hours. Read as fixed offsets it would close at 05:00 UTC, an hour late."""
    w = window.parse(WEEKEND)
    opens, closes = w.occurrence(datetime(2026, 3, 28).date())  # type: ignore[misc]
    assert (opens, closes) == (utc(2026, 3, 28, 21, 0), utc(2026, 3, 29, 4, 0))
    assert closes - opens == timedelta(hours=7)
    assert w.closes(utc(2026, 3, 29, 3, 59)) == utc(2026, 3, 29, 4, 0)
    assert not w.contains(utc(2026, 3, 29, 4, 30))  # 06:30 CEST: closed
    assert w.local(closes) == "2026-03-29T06:00+02:00"


def test_fall_back_the_window_lasts_nine_hours() -> None:
    """24/25 October 2026: opens Saturday 22:00 CEST (20:00 UTC), closes Sunday 06:00 CET
    (05:00 UTC): 9 hours."""
    w = window.parse(WEEKEND)
    opens, closes = w.occurrence(datetime(2026, 10, 24).date())  # type: ignore[misc]
    assert (opens, closes) == (utc(2026, 10, 24, 20, 0), utc(2026, 10, 25, 5, 0))
    assert w.contains(utc(2026, 10, 25, 4, 30))  # 05:30 CET: still open
    assert w.local(opens) == "2026-10-24T22:00+02:00"


def test_a_boundary_the_change_skips_is_the_change_itself() -> None:
    """02:30 does not exist on 29 March 2026 in Berlin: a window from 02:30 opens at 03:00
    CEST (01:00 UTC), the first instant the clocks show 02:30 or later."""
    w = window.parse("daily 02:30-04:00 Europe/Berlin")
    assert w.occurrence(datetime(2026, 3, 29).date()) == (
        utc(2026, 3, 29, 1, 0),
        utc(2026, 3, 29, 2, 0),
    )
    assert not w.contains(utc(2026, 3, 29, 0, 59))
    assert w.contains(utc(2026, 3, 29, 1, 0))


def test_a_boundary_that_occurs_twice_is_its_first_occurrence() -> None:
    """02:30 occurs twice on 25 October 2026 (CEST, then CET): a window closing at 02:30
    closes at the first (00:30 UTC), never an hour late."""
    w = window.parse("daily 01:00-02:30 Europe/Berlin")
    assert w.closes(utc(2026, 10, 24, 23, 30)) == utc(2026, 10, 25, 0, 30)
    assert not w.contains(utc(2026, 10, 25, 1, 0))  # 02:00 CET (the second 02:00)
    opening = window.parse("daily 02:30-05:00 Europe/Berlin")
    assert opening.opens(utc(2026, 10, 24, 22, 0)) == utc(2026, 10, 25, 0, 30)


def test_daily_windows_across_midnight_and_within_a_day() -> None:
    night = window.parse("daily 22:00-06:00 UTC")
    assert night.days == 1
    assert night.closes(utc(2026, 12, 2, 23, 0)) == utc(2026, 12, 3, 6, 0)
    assert night.closes(utc(2026, 12, 3, 5, 0)) == utc(2026, 12, 3, 6, 0)  # opened the day before
    assert not night.contains(utc(2026, 12, 3, 12, 0))
    day = window.parse("daily 09:00-17:00 America/New_York")
    assert day.days == 0
    assert day.closes(utc(2026, 12, 2, 15, 0)) == utc(2026, 12, 2, 22, 0)  # EST, UTC-5


def test_a_window_of_almost_a_week_and_one_within_a_day() -> None:
    w = window.parse("Mon 06:00-Mon 05:00 UTC")
    assert w.days == 7
    assert w.contains(utc(2026, 12, 6, 12, 0))  # the Sunday before it closes
    short = window.parse("Wed 10:00-Wed 12:00 UTC")
    assert short.days == 0 and short.contains(utc(2026, 12, 2, 11, 0))
    assert not short.contains(utc(2026, 12, 3, 11, 0))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("Sat 22:00-Sun 06:00", "is not a maintenance window"),  # no zone
        ("Sat 22:00-Sun 06:00 Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
        ("Sat 22:00-Sun 06:00 ../../etc/passwd", "is not a time zone"),
        ("Sat 24:00-Sun 06:00 UTC", "is not a maintenance window"),
        ("Sat 22:00-Sun 6:00 UTC", "is not a maintenance window"),
        ("Sabado 22:00-Sun 06:00 UTC", "is not a maintenance window"),
        ("Sat 22:00-Sat 22:00 UTC", "is a whole week"),
        ("daily 22:00-22:00 UTC", "is a whole day"),
        ("daily 22:00-06:00 UTC; rm -rf /", "is not a maintenance window"),
        ("", "is not a maintenance window"),
    ],
)
def test_bad_windows_are_refused_naming_them(text: str, says: str) -> None:
    with pytest.raises(InvalidInput, match=says) as caught:
        window.parse(text)
    assert caught.value.exit_code == 2


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="aware"):
        window.parse(WEEKEND).contains(datetime(2026, 3, 29, 4, 0))


@pytest.mark.parametrize(
    ("text", "seconds"), [("40m", 2400), ("1h30m", 5400), ("90s", 90), ("2H", 7200)]
)
def test_durations(text: str, seconds: int) -> None:
    assert window.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "40", "m", "0s", "-5m", "8d", "200h", "1h 30m"])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        window.parse_duration(text)


def test_duration_text() -> None:
    assert [window.duration_text(s) for s in (35, 2400, 2435, 7500)] == [
        "35s",
        "40m",
        "40m35s",
        "2h05m",
    ]
