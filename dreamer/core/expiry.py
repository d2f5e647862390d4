"""Facts that expire: the time a fact refers to, resolved against when it was said.

"My interview is next Tuesday" stops being current once that Tuesday is over; "the board
meeting is on 15 February" once the 15th is; "launching this quarter" once the quarter ends.
`resolve_time` finds such a time in a memory's text and says until when the fact is current:
the end of the event's day (or of the period) in the user's time zone, as a UTC time.

* Dates: "15 February", "Feb 15", "March 1st", "the 3rd of May", "2027-03-01", "on the 3rd";
  without a year, the next such day on or after the day it was said.
* Relative times: "today", "tonight", "tomorrow", "next Tuesday" (the Tuesday of next week,
  weeks starting on Monday), "this Friday" (today included), "on Monday" / "by Monday" (the
  next one after today), "in two weeks", "next week", "next month", "this quarter", "by the end
  of the month".
* Open states ("pending", "waiting for", "applied for", "interviewing") end when they are
  completed, not on a date: `provisional`, with no date unless one is named.

* Durations, counted from when the fact was said: "for the next two weeks", "for ten days",
  "for the weekend", "until Friday", "through March" (to the end of March), "until June" (to the
  end of May), "this semester" (to 30 June or 31 December), "this summer".
* An event moved to a day ("the offsite was moved to February 15th") is current until that day.

What never expires gives None: a recurring time ("every Monday", "on Tuesdays", "on Thursday
nights", "every morning", "weekly", a birthday), a duration that has run ("has been vegetarian
for five years", "lived in Paris for two years"), an event's own day ("died on Tuesday"), a number that is no time ("lives at 15 Main St", "has 2 kids", "born in March"), a
past time ("last Tuesday", "3 weeks ago"), a date said after it had passed ("moved on
2019-06-01"), and a date without a year beside a verb in the past ("moved to Lisbon on 3 March"):
a fact about what happened stays true.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_MONTH = r"(?-i:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sept?(?:ember)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\b\.?"
_ORD = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<y>(?:19|20)\d\d)\b)?"
_WD = rf"(?P<wd>{'|'.join(WEEKDAYS)})\b(?!'s)"
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "a couple of": 2,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_COUNT = rf"(?P<n>\d{{1,3}}|{'|'.join(sorted(_NUMBERS, key=len, reverse=True))})"

_DAY_MONTH = re.compile(rf"\b(?<![\d-])(?P<d>\d{{1,2}}){_ORD}(?:\s+of)?\s+(?P<m>{_MONTH}){_YEAR}", re.I)
_MONTH_DAY = re.compile(rf"\b(?P<m>{_MONTH})\s+(?P<d>\d{{1,2}}){_ORD}\b(?![:.]\d){_YEAR}", re.I)
_ISO = re.compile(r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b")
_NTH = re.compile(
    rf"\bon the (?P<d>\d{{1,2}}){_ORD}(?=\s*(?:[.,;:!?)]|$|\s(?:at|and|or|for|to|with|when|which|but|so)\b))", re.I
)
_DAY_WORD = re.compile(
    r"\b(?<!as of )(?P<w>today|tonight|this (?:morning|afternoon|evening)|(?:the day after )?tomorrow)\b", re.I
)
_WEEKDAY = re.compile(rf"\b(?P<w>next|this(?: coming)?|coming|on|by|until|till|til|through|thru|before) {_WD}", re.I)
_IN_COUNT = re.compile(
    rf"\b(?:in|within)(?: the next)? {_COUNT} (?P<u>day|week|month|year)s?\b(?!\s+(?:ago|old|running|in a row))", re.I
)
_PERIOD = re.compile(
    r"\b(?:(?:by |at |before )?(?:the )?end of (?P<e>the |this |next )?|(?P<w>next|this|later this) )"
    r"(?P<p>week(?:end)?|month|quarter|year)\b",
    re.I,
)
_OPEN = re.compile(
    r"\b(?:pending|awaiting|waiting (?:for|on|to hear)|applied (?:for|to)|interviewing|under review|shortlisted"
    r"|waitlisted|on the waitlist)\b",
    re.I,
)
_RECURRING = re.compile(
    r"\b(?:every|each|weekly|daily|nightly|monthly|quarterly|annually|yearly|usually|always|born|birthday"
    r"|anniversary|since|(?:mon|tues|wednes|thurs|fri|satur|sun)days|weekends|most days|weeknights"
    r"|(?:on|most|weekday|in the|(?:mon|tues|wednes|thurs|fri|satur|sun)day) (?:mornings|afternoons|evenings|nights)"
    r"|(?:once|twice|\w+ times) a (?:day|week|month|year))\b",
    re.I,
)
# A duration said from now: "for the next two weeks", "for ten days", "for a month".
_DURATION = re.compile(
    rf"\bfor (?:the next |the coming |another |an extra |a further )?{_COUNT} (?P<u>day|night|week|month|year)s?\b",
    re.I,
)
_HAS_RUN = re.compile(
    r"\b(?:has|have|had|'s|'ve)\s+been\b|\bfor the (?:past|last)\b|\b(?:lived|worked|stayed|spent|was|were)\b", re.I
)
_WEEKEND = re.compile(r"\b(?:for|over|during) the weekend\b", re.I)
_THROUGH_MONTH = re.compile(
    rf"\b(?:(?P<t>through|thru|(?:until|till|through|to|by) the end of|(?:the )?end of)|(?P<u>until|till|til))"
    rf"\s+(?P<m>{_MONTH})(?!\s*\d)",
    re.I,
)
_SEASON = re.compile(r"\b(?:this|the current|for the) (?P<s>semester|term|summer|school year)\b", re.I)
# An event given a new day: its day is when the fact ends, whatever verb moved it.
_MOVED_TO_DAY = re.compile(
    rf"\b(?:moved|pushed(?: back)?|postponed|rescheduled|shifted|bumped|delayed|brought forward)\s+"
    rf"(?:to|until|till|for)\s+(?:(?:next|this|on|the)\s+)?(?:{_MONTH}|\d|{'|'.join(WEEKDAYS)})",
    re.I,
)
_PAST_TIME = re.compile(rf"\b(?:ago|yesterday|last (?:{'|'.join(WEEKDAYS)}|week|weekend|month|quarter|year))\b", re.I)
_PAST_VERB = re.compile(
    r"\b(?:died|passed away|broke|crashed|fell|proposed|announced|gave birth|was diagnosed|got engaged|"
    r"was|were|had|did|went|moved|started|finished|ended|left|joined|graduated|married|met|bought|sold"
    r"|visited|returned|arrived|happened|celebrated|completed|lost|gained|ran|wrote|built|saved|took"
    r"|learned|learnt|quit|became)\b",
    re.I,
)


@dataclass(frozen=True)
class Expiry:
    """Until when a fact is current (`until`, UTC: the end of its day or period; None for an
    open state without a date), and whether it is an open state completion ends (`provisional`)."""

    until: datetime | None
    provisional: bool = False

    def day(self, tz: tzinfo = UTC) -> date | None:
        """The day it stops being current, in `tz`."""
        return self.until.astimezone(tz).date() if self.until is not None else None


def resolve_time(text: str, said: datetime, tz: tzinfo = UTC) -> Expiry | None:
    """Until when the fact `text`, said at `said` (naive: UTC), is current: the latest time it
    names, at the end of that day or period in `tz`; None for a durable fact (module doc)."""
    if _RECURRING.search(text) or _PAST_TIME.search(text):
        return None
    at = said if said.tzinfo is not None else said.replace(tzinfo=UTC)
    try:
        today = at.astimezone(tz).date()
        ends = [end_of_day(d, tz) for d in _days(text, today) if d >= today]
    except (OverflowError, ValueError):  # off the calendar's ends ("in 900 years" of 9990)
        ends = []
    provisional = _OPEN.search(text) is not None
    if not ends:
        return Expiry(None, provisional=True) if provisional else None
    return Expiry(max(ends), provisional=provisional)


def is_past(until: datetime | None, now: datetime) -> bool:
    """Whether a fact current until `until` (None: no end) is past at `now` (naive: UTC)."""
    if until is None:
        return False
    return _aware(until) < _aware(now)


def later_end(until: datetime | None, again: datetime | None) -> datetime | None:
    """Until when a fact is current once it is said again: the later of the two ends (a
    restated "next Tuesday" may be a week on); None when neither names one."""
    if until is None or again is None:
        one = until or again
        return _aware(one) if one is not None else None
    return max(_aware(until), _aware(again))


def end_of_day(day: date, tz: tzinfo = UTC) -> datetime:
    """The last second of `day` in `tz`, as a UTC time."""
    return datetime.combine(day, time(23, 59, 59), tzinfo=tz).astimezone(UTC)


def _aware(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


# --------------------------------------------------------------------------- the days a text names


def _days(text: str, today: date) -> Iterator[date]:
    past_verb = _PAST_VERB.search(text) is not None and _MOVED_TO_DAY.search(text) is None
    for finder in _FINDERS:
        yield from finder(text, today, past_verb)


def _explicit(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """Days named by day and month (a year, else the next on or after today), or ISO."""
    for rx in (_DAY_MONTH, _MONTH_DAY):
        for m in rx.finditer(text):
            month = _month_number(m.group("m"))
            if m.group("y"):
                yield from _valid(int(m.group("y")), month, int(m.group("d")))
            elif not past_verb:
                yield from _next_on_or_after(today, month, int(m.group("d")))
    for m in _ISO.finditer(text):
        yield from _valid(int(m.group("y")), int(m.group("m")), int(m.group("d")))


def _nth(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """Days said as "on the 3rd": that day of this month, else of the next month that has it."""
    if past_verb:
        return
    for m in _NTH.finditer(text):
        d = int(m.group("d"))
        year, month = today.year, today.month
        for _ in range(3):
            found = list(_valid(year, month, d))
            if found and found[0] >= today:
                yield found[0]
                break
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)


def _day_words(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """Days said as "today" (not beside a past verb: "started a new job today"), "tomorrow"..."""
    for m in _DAY_WORD.finditer(text):
        word = m.group("w").lower()
        if past_verb and "tomorrow" not in word:
            continue
        yield today + timedelta(days=2 if word.startswith("the day after") else 1 if word == "tomorrow" else 0)


def _weekdays(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """Weekdays: "next Tuesday" is of next week; "this Friday": the coming one, today included; "on/by
    Monday": the next one after today (not said beside a past verb)."""
    for m in _WEEKDAY.finditer(text):
        word, target = m.group("w").lower(), WEEKDAYS.index(m.group("wd").lower())
        if word == "next":
            yield today + timedelta(days=7 - today.weekday() + target)
        elif word.startswith("this") or word == "coming":
            yield today + timedelta(days=(target - today.weekday()) % 7)
        elif not past_verb:
            yield today + timedelta(days=(target - today.weekday() - 1) % 7 + 1)


def _counted(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """Counted days: "in two weeks", "within 3 days", "in a month" (beside a past verb it is a
    duration: "lost 5 kg in 2 months")."""
    if past_verb:
        return
    for m in _IN_COUNT.finditer(text):
        raw = m.group("n").lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[" ".join(raw.split())]
        unit = m.group("u").lower()
        if unit == "day":
            yield today + timedelta(days=n)
        elif unit == "week":
            yield today + timedelta(weeks=n)
        else:
            yield _add_months(today, n * (12 if unit == "year" else 1))


def _periods(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """The last day of "this/next week", "next month", "this quarter", "the end of the month"...
    (not beside a past verb: "moved to Berlin this year" stays true)."""
    if past_verb:
        return
    for m in _PERIOD.finditer(text):
        which = (m.group("e") or m.group("w") or "this").strip().lower()
        yield _period_end(m.group("p").lower(), 1 if which == "next" else 0, today)


def _durations(text: str, today: date, past_verb: bool) -> Iterator[date]:
    """The end of a duration said from now: "for two weeks", "for the weekend", "through March",
    "until June" (the end of May), "this semester"; not one that has run ("has been ... for")."""
    if past_verb or _HAS_RUN.search(text):
        return
    for m in _DURATION.finditer(text):
        raw, unit = " ".join(m.group("n").lower().split()), m.group("u").lower()
        n = int(raw) if raw.isdigit() else _NUMBERS[raw]
        if unit in ("day", "night"):
            yield today + timedelta(days=n)
        elif unit == "week":
            yield today + timedelta(weeks=n)
        else:
            yield _add_months(today, n * (12 if unit == "year" else 1))
    if _WEEKEND.search(text):
        yield _period_end("weekend", 0, today)
    for m in _THROUGH_MONTH.finditer(text):
        month = _month_number(m.group("m"))
        year = today.year if month >= today.month else today.year + 1
        last = _add_months(date(year, month, 1), 1) - timedelta(days=1)
        yield last if m.group("t") else date(year, month, 1) - timedelta(days=1)
    for m in _SEASON.finditer(text):
        yield _season_end(m.group("s").lower(), today)


def _season_end(season: str, today: date) -> date:
    """The last day of this semester or term (30 June, 31 December), summer (31 August) or
    school year (30 June)."""
    if season == "summer":
        return date(today.year, 8, 31)
    if season == "school year" or today.month <= 6:
        return date(today.year, 6, 30)
    return date(today.year, 12, 31)


_FINDERS: tuple[Callable[[str, date, bool], Iterator[date]], ...] = (
    _explicit,
    _nth,
    _day_words,
    _weekdays,
    _counted,
    _periods,
    _durations,
)


# --------------------------------------------------------------------------- calendar arithmetic


def _period_end(period: str, ahead: int, today: date) -> date:
    """The last day of the week (Sunday; a weekend's too), month, quarter or year `ahead` of today's."""
    if period.startswith("week"):
        return today + timedelta(days=6 - today.weekday() + 7 * ahead)
    if period == "year":
        return date(today.year + ahead, 12, 31)
    months = 3 if period == "quarter" else 1
    first = (today.month - 1) // months * months + 1  # the first month of this period
    return _add_months(date(today.year, first, 1), months * (ahead + 1)) - timedelta(days=1)


def _add_months(day: date, n: int) -> date:
    """`day` n months on, on the month's last day when it is shorter."""
    index = day.year * 12 + day.month - 1 + n
    year, month = divmod(index, 12)
    return date(year, month + 1, min(day.day, calendar.monthrange(year, month + 1)[1]))


def _month_number(name: str) -> int:
    key = name.rstrip(".")[:3].lower()
    return next(i for i, full in enumerate(MONTHS, start=1) if full[:3].lower() == key)


def _valid(year: int, month: int, day: int) -> Iterator[date]:
    try:
        yield date(year, month, day)
    except ValueError:  # 31 June, 29 February of a common year, month 13
        return


def _next_on_or_after(today: date, month: int, day: int) -> Iterator[date]:
    """The next `day` of `month` on or after today (29 February: within four years)."""
    for year in range(today.year, today.year + 5):
        for found in _valid(year, month, day):
            if found >= today:
                yield found
                return
