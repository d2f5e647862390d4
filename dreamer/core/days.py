"""Days as the user lives them.

The store keeps times in UTC; one time zone (`DREAMER_TIMEZONE`, default UTC) decides which day
a time falls on wherever a day is shown or matched: the day headings of a transcript sent to
the model, the daily-note files and rows, and the days a memory's evidence was said on (its
index document and the date signal of recall).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dreamer.core.errors import CalendarEdge

_OFFSET_BOUND = timedelta(days=1)  # every UTC offset a time zone can have is less than a day
FIRST_TIME = datetime.min.replace(tzinfo=UTC) + _OFFSET_BOUND
"""The earliest time whose day every time zone can tell (0001-01-02T00:00Z)."""
LAST_TIME = datetime.max.replace(tzinfo=UTC) - _OFFSET_BOUND
"""The latest time whose day every time zone can tell (9999-12-30T23:59:59.999999Z)."""


def zone(name: str) -> tzinfo:
    """The IANA time zone named ("UTC", "Europe/Oslo"); `ValueError` for one that is not known
    (and for "localtime", which names the machine's zone, not the user's)."""
    key = name.strip()
    if key.upper() == "UTC":
        return UTC
    if key.lower() != "localtime":
        try:
            return ZoneInfo(key)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ValueError(f"unknown time zone {name!r} (an IANA name such as UTC or Europe/Oslo)")


def day_problem(at: datetime) -> str | None:
    """Why the day `at` falls on cannot be told in every time zone, or None: within a day of the
    calendar's edge a zone's offset would carry it out of the calendar. A naive time is UTC."""
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    if FIRST_TIME <= aware <= LAST_TIME:
        return None
    return (
        f"{aware.isoformat()} is too close to the calendar's edge: its day cannot be told in every"
        f" time zone (times from {FIRST_TIME.date().isoformat()} to {LAST_TIME.date().isoformat()} UTC are kept)"
    )


def local_day(at: datetime, tz: tzinfo) -> date:
    """The day `at` falls on in `tz`; a naive time is UTC, as the store keeps them. `CalendarEdge`
    (a `ValueError` saying which time) when `tz` would carry it out of the calendar (`day_problem`)."""
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    try:
        return aware.astimezone(tz).date()
    except OverflowError:
        raise CalendarEdge(day_problem(aware) or f"{aware.isoformat()} has no day in {tz}") from None


def day_words(day: date) -> str:
    """A day as words a model and BM25 both read: "8 May 2023"."""
    return f"{day.day} {day:%B %Y}"
