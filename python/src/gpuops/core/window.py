"""Maintenance windows (``gpuops nodes update --window``), pure: parsed from text, asked "is
this instant inside", "when does the window around it close", "when does it open next".

Forms (days Mon..Sun, 24-hour times, an IANA time zone, all required)::

    Sat 22:00-Sun 06:00 Europe/Berlin     # weekly: from Saturday 22:00 to the Sunday after
    daily 22:00-06:00 UTC                 # every day; an end at or before the start is the
                                          # next day's

Times are wall-clock times in the zone, so a window keeps its local hours across a daylight
saving change (``Sat 22:00-Sun 06:00 Europe/Berlin`` lasts 7 hours on 29 March 2026 and 9 on
25 October 2026). One rule places a boundary whose local time the change skips or repeats:
*the first instant the zone's clocks show that time or a later one*. A time skipped in spring
(02:30 on 29 March in Berlin) is the change itself (03:00 CEST); a time that occurs twice in
autumn (02:30 on 25 October) is its first occurrence (CEST), so a window closing then closes
an hour early rather than late.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from datetime import time as clock
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpuops.core.values import shown
from gpuops.errors import InvalidInput

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_TIME = r"([01][0-9]|2[0-3]):([0-5][0-9])"
_WEEKLY = re.compile(rf"(?i)({'|'.join(DAYS)}) {_TIME}-({'|'.join(DAYS)}) {_TIME} (\S+)")
_DAILY = re.compile(rf"(?i)daily {_TIME}-{_TIME} (\S+)")
_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*")
_HINT = (
    "a window is 'Sat 22:00-Sun 06:00 Europe/Berlin' (days Mon..Sun, 24-hour times, an IANA "
    "time zone) or 'daily 22:00-06:00 UTC'"
)


@dataclass(frozen=True)
class Window:
    text: str  # as given, blanks collapsed
    zone: str
    start: clock
    end: clock
    start_day: int | None  # 0 = Monday; None: every day
    days: int  # calendar days from a start's date to its end's date (0..7)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def occurrence(self, day: date) -> tuple[datetime, datetime] | None:
        """The window opening on local date ``day`` (UTC instants), None if none opens then."""
        if self.start_day is not None and day.weekday() != self.start_day:
            return None
        tz = self.tz
        return instant(day, self.start, tz), instant(day + timedelta(days=self.days), self.end, tz)

    def _around(self, t: datetime) -> list[tuple[datetime, datetime]]:
        local = _utc(t).astimezone(self.tz).date()
        found = (self.occurrence(local + timedelta(days=d)) for d in range(-8, 9))
        return [o for o in found if o is not None and o[0] < o[1]]

    def closes(self, t: datetime) -> datetime | None:
        """When the window ``t`` is inside closes (UTC); None when ``t`` is outside."""
        u = _utc(t)
        inside = [end for start, end in self._around(u) if start <= u < end]
        return max(inside) if inside else None

    def contains(self, t: datetime) -> bool:
        return self.closes(t) is not None

    def opens(self, t: datetime) -> datetime:
        """The next opening after ``t`` (UTC)."""
        u = _utc(t)
        return min(start for start, _ in self._around(u) if start > u)

    def local(self, t: datetime) -> str:
        """``t`` in the window's zone, ISO 8601 to the minute with its UTC offset."""
        return _utc(t).astimezone(self.tz).isoformat(timespec="minutes")


def _utc(t: datetime) -> datetime:
    if t.tzinfo is None:
        raise ValueError("a window is asked about aware datetimes only")
    return t.astimezone(UTC)


def instant(day: date, at: clock, tz: ZoneInfo) -> datetime:
    """The first instant (UTC) the clocks of ``tz`` show ``day`` ``at`` or later."""
    wall = datetime.combine(day, at)
    first = wall.replace(tzinfo=tz, fold=0).astimezone(UTC)
    second = wall.replace(tzinfo=tz, fold=1).astimezone(UTC)
    if _wall(first, tz) == wall or _wall(second, tz) == wall:
        # it exists (once, or twice in autumn: the earlier one)
        return min(x for x in (first, second) if _wall(x, tz) == wall)
    # skipped in spring: the change itself, between the two readings; clocks jump in whole
    # seconds, and before the change the wall time is earlier than ``wall``
    lo, hi = min(first, second), max(first, second)
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if _wall(mid, tz) >= wall:
            hi = mid
        else:
            lo = mid
    return hi.replace(microsecond=0)


def _wall(t: datetime, tz: ZoneInfo) -> datetime:
    return t.astimezone(tz).replace(tzinfo=None)


def _zone(name: str, text: str) -> str:
    if len(name) > 64 or not _ZONE.fullmatch(name):
        raise InvalidInput(f"window {shown(text)}: {shown(name)} is not a time zone", hint=_HINT)
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput(
            f"window {shown(text)}: unknown time zone {shown(name)}",
            hint="an IANA name such as Europe/Berlin, America/New_York or UTC",
        ) from None
    return name


def parse(value: str) -> Window:
    """A window from its text (exit 2 naming what is wrong)."""
    if not isinstance(value, str) or len(value) > 200:
        raise InvalidInput(f"{shown(value)} is not a maintenance window", hint=_HINT)
    text = " ".join(value.split())
    if m := _WEEKLY.fullmatch(text):
        d1, h1, m1, d2, h2, m2, zone = m.groups()
        start_day, end_day = _day(d1), _day(d2)
        start, end = clock(int(h1), int(m1)), clock(int(h2), int(m2))
        days = (end_day - start_day) % 7
        if days == 0 and end <= start:
            days = 7
        if days == 7 and end == start:
            raise InvalidInput(
                f"window {shown(text)} is a whole week: give no --window instead", hint=_HINT
            )
        return Window(text, _zone(zone, text), start, end, start_day, days)
    if m := _DAILY.fullmatch(text):
        h1, m1, h2, m2, zone = m.groups()
        start, end = clock(int(h1), int(m1)), clock(int(h2), int(m2))
        if start == end:
            raise InvalidInput(
                f"window {shown(text)} is a whole day: give no --window instead", hint=_HINT
            )
        return Window(text, _zone(zone, text), start, end, None, 0 if end > start else 1)
    raise InvalidInput(f"{shown(value)} is not a maintenance window", hint=_HINT)


def _day(name: str) -> int:
    return [d.lower() for d in DAYS].index(name.lower())


_DURATION = re.compile(r"(?:([0-9]{1,3})h)?(?:([0-9]{1,4})m)?(?:([0-9]{1,6})s)?")


def parse_duration(value: str) -> int:
    """Seconds of a duration like ``40m``, ``1h30m``, ``90s`` (exit 2 otherwise; 1 s to 7 d)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    m = _DURATION.fullmatch(text) if text else None
    if m is None or not any(m.groups()):
        raise InvalidInput(
            f"{shown(value)} is not a duration", hint="a duration like 40m, 1h30m or 90s"
        )
    h, mi, s = (int(g or 0) for g in m.groups())
    seconds = h * 3600 + mi * 60 + s
    if not 1 <= seconds <= 7 * 86400:
        raise InvalidInput(f"{shown(value)}: a duration from 1s to 7 days", hint="e.g. 40m")
    return seconds


def duration_text(seconds: float) -> str:
    """``2h05m``, ``40m``, ``35s``: a duration as a person reads it (whole seconds)."""
    s = max(0, round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    if m:
        return f"{m}m" + (f"{s:02d}s" if s else "")
    return f"{s}s"
