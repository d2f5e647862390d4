"""Days as the user lives them.

The store keeps times in UTC; one time zone (`DREAMER_TIMEZONE`, default UTC) decides which day
a time falls on wherever a day is shown or matched: the day headings of a transcript sent to
the model, the daily-note files and rows, and the days a memory's evidence was said on (its
index document and the date signal of recall).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


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


def local_day(at: datetime, tz: tzinfo) -> date:
    """The day `at` falls on in `tz`; a naive time is UTC, as the store keeps them."""
    aware = at if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return aware.astimezone(tz).date()


def day_words(day: date) -> str:
    """A day as words a model and BM25 both read: "8 May 2023"."""
    return f"{day.day} {day:%B %Y}"
