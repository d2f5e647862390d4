import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

from dreamer.core.days import zone
from dreamer.core.expiry import Expiry, end_of_day, is_past, later_end, resolve_time

SAID = datetime(2027, 2, 10, 10, 0, tzinfo=UTC)  # a Wednesday

DATED = [
    # explicit dates: the year, else the next such day on or after the day it was said
    ("The user's board meeting is on 15 February.", date(2027, 2, 15)),
    ("The board meeting is on Feb 15.", date(2027, 2, 15)),
    ("The user's lease renewal is due March 1st.", date(2027, 3, 1)),
    ("The user must file the report by 1 March.", date(2027, 3, 1)),
    ("The user's recital is on the 3rd of May.", date(2027, 5, 3)),
    ("The user's grant deadline is February 5.", date(2028, 2, 5)),
    ("The user's launch is set for 2027-03-01.", date(2027, 3, 1)),
    ("The user's exam is on 15 February 2027.", date(2027, 2, 15)),
    ("The user's visa appointment is Feb. 20, 2027.", date(2027, 2, 20)),
    ("The user's exam is on 10 February.", date(2027, 2, 10)),
    ("The user's rent is due on the 3rd.", date(2027, 3, 3)),
    ("The user's flight leaves on the 12th, early.", date(2027, 2, 12)),
    ("The user's review is on the 31st.", date(2027, 3, 31)),
    ("The user got an extension: the deadline is now on 1 May.", date(2027, 5, 1)),
    # days by name
    ("The user has a haircut today.", date(2027, 2, 10)),
    ("The user is cooking for friends tonight.", date(2027, 2, 10)),
    ("The user's interview is tomorrow.", date(2027, 2, 11)),
    ("The user flies out the day after tomorrow.", date(2027, 2, 12)),
    # weekdays: next = of next week, this = the coming one with today, on/by = after today
    ("The user's interview is next Tuesday.", date(2027, 2, 16)),
    ("The user's dinner party is next Sunday.", date(2027, 2, 21)),
    ("The user has a dentist appointment this Friday.", date(2027, 2, 12)),
    ("The user's demo is this Wednesday.", date(2027, 2, 10)),
    ("The user's recital is on Monday.", date(2027, 2, 15)),
    ("The user's dentist visit was on Monday.", None),  # a past verb: what happened
    ("The user has to send the draft by Wednesday.", date(2027, 2, 17)),
    ("The user's deadline is this coming Friday.", date(2027, 2, 12)),
    ("The user's party is on Saturday.", date(2027, 2, 13)),
    # counted and periods
    ("The user starts the new job in two weeks.", date(2027, 2, 24)),
    ("The user's results come in 3 days.", date(2027, 2, 13)),
    ("The user's lease ends in a month.", date(2027, 3, 10)),
    ("The user expects an answer within a couple of weeks.", date(2027, 2, 24)),
    ("The user is travelling next week.", date(2027, 2, 21)),
    ("The user is busy this week.", date(2027, 2, 14)),
    ("The user is hiking this weekend.", date(2027, 2, 14)),
    ("The user is moving next month.", date(2027, 3, 31)),
    ("The user must finish the thesis by the end of the month.", date(2027, 2, 28)),
    ("The user's team launches this quarter.", date(2027, 3, 31)),
    ("The user's team launches next quarter.", date(2027, 6, 30)),
    ("The user wants to run a marathon by the end of the year.", date(2027, 12, 31)),
    # several times: the latest
    ("The user's interview is on 15 February and the offer comes by 1 March.", date(2027, 3, 1)),
]

DURABLE = [
    "The user runs 5k on Tuesdays.",
    "The user lives at 15 Main St.",
    "The user has 2 kids.",
    "The user was born in March.",
    "The user was born on 15 March 1990.",
    "The user's birthday is 15 March.",
    "The user goes climbing every Monday.",
    "The user has a standup each Friday.",
    "The user has lived in Berlin since 2019.",
    "The user moved to Lisbon on 3 March.",
    "The user moved to Berlin this year.",
    "The user got married this month.",
    "The user had an interview last Tuesday.",
    "The user quit smoking 3 weeks ago.",
    "The user lives on the 3rd floor.",
    "The user works 3 days a week.",
    "The user has a 2-year-old daughter.",
    "The user has 12 years of experience in Python.",
    "The user lost 5 kg in 2 months.",
    "The user married on 2019-06-01.",
    "The user's exam was on 15 February 2026.",
    "The user started a new job today.",
    "The user is vegan as of today.",
    "The user prefers dark mode.",
    "The user's favourite month is May.",
    "The user may 3D print a case.",
    "The user sleeps 8 hours a night.",
    "The user's day off is Friday.",
    "The user runs on Sundays and rests on Monday.",
    "The user hikes on weekends, this weekend too.",
]


@pytest.mark.parametrize(
    ("text", "said", "tz"),
    [
        ("The user retires in 900 years.", datetime(9990, 1, 1, tzinfo=UTC), UTC),
        ("The user's deadline is 9999-12-31.", SAID, zone("America/New_York")),
        ("The user's review is on the 99th.", SAID, UTC),
        ("The user's exam is on Feb 30 and 31 June.", SAID, UTC),
        ("The user's exam is on 29 February.", datetime(9998, 3, 1, tzinfo=UTC), UTC),
        ("The user's exam is tomorrow.", datetime(1, 1, 1, tzinfo=UTC), zone("America/New_York")),
    ],
)
def test_a_time_off_the_calendar_names_no_end(text, said, tz):
    assert resolve_time(text, said, tz) is None


@pytest.mark.parametrize(("text", "day"), DATED)
def test_a_dated_fact_is_current_until_the_end_of_its_day(text, day):
    found = resolve_time(text, SAID)
    if day is None:
        assert found is None
        return
    assert found is not None
    assert found.day() == day
    assert found.until == datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=UTC)
    assert not found.provisional


@pytest.mark.parametrize("text", DURABLE)
def test_a_durable_fact_never_expires(text):
    assert resolve_time(text, SAID) is None


@pytest.mark.parametrize(
    "text",
    [
        "The user's IRB amendment is pending.",
        "The user applied for a job at Acme.",
        "The user is interviewing at two startups.",
        "The user is waiting for the visa decision.",
        "The user's paper is under review.",
    ],
)
def test_an_open_state_is_provisional_without_a_date(text):
    assert resolve_time(text, SAID) == Expiry(None, provisional=True)


def test_an_open_state_with_a_date_keeps_both():
    found = resolve_time("The user is waiting for the visa, due by 1 March.", SAID)
    assert found == Expiry(end_of_day(date(2027, 3, 1)), provisional=True)


def test_days_are_counted_in_the_users_time_zone():
    late = datetime(2027, 2, 10, 23, 30, tzinfo=UTC)  # already the 11th in Oslo
    oslo = zone("Europe/Oslo")
    found = resolve_time("The user's interview is tomorrow.", late, oslo)
    assert found is not None
    assert found.day(oslo) == date(2027, 2, 12)
    assert found.until == datetime(2027, 2, 12, 22, 59, 59, tzinfo=UTC)
    naive = resolve_time("The user's interview is tomorrow.", datetime(2027, 2, 10, 23, 30))  # naive: UTC
    assert naive is not None and naive.day() == date(2027, 2, 11)


def test_past_is_after_the_end_of_the_day():
    until = end_of_day(date(2027, 2, 15))
    assert not is_past(until, datetime(2027, 2, 15, 23, 0, tzinfo=UTC))
    assert is_past(until, datetime(2027, 2, 16, 0, 0, tzinfo=UTC))
    assert is_past(until.replace(tzinfo=None), datetime(2027, 2, 16))  # naive: UTC
    assert not is_past(None, datetime(2099, 1, 1, tzinfo=UTC))


def test_a_fact_said_again_keeps_the_later_end():
    first, again = end_of_day(date(2027, 2, 16)), end_of_day(date(2027, 2, 23))
    assert later_end(first, again) == again
    assert later_end(again, first) == again
    assert later_end(first.replace(tzinfo=None), again) == again  # naive, as SQLite gives it back: UTC
    assert later_end(None, again) == again
    assert later_end(first, None) == first
    assert later_end(None, None) is None


def _expiry_set() -> tuple[datetime, list[dict]]:
    data = json.loads((Path(__file__).parent / "data" / "expiry-dev.json").read_text())
    return datetime.fromisoformat(data["said"]).replace(hour=12, tzinfo=UTC), data["phrases"]


@pytest.mark.parametrize("phrase", _expiry_set()[1], ids=lambda p: p["text"])
def test_durations_recurring_times_and_event_days_read_right(phrase):
    """The dev set of durations ("for the next two weeks", "until Friday", "through March", "this
    semester"), recurring times ("on Thursday nights", "every morning": never), event days ("died
    on Tuesday": no end; "moved to April 15th": that day) and durations that have run."""
    found = resolve_time(phrase["text"], _expiry_set()[0])
    day = found.day() if found is not None and found.until is not None else None
    assert (day.isoformat() if day else None) == phrase["until"]
