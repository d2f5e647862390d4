from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from dreamer.core.days import day_words, local_day, zone


def test_zones_by_name():
    assert zone("UTC") is UTC
    assert zone("utc") is UTC
    assert str(zone("Europe/Oslo")) == "Europe/Oslo"
    assert str(zone(" Europe/Oslo\n")) == "Europe/Oslo"


@pytest.mark.parametrize(
    "name", ["Mars/Base", "", "../etc/passwd", "America", "Europe/", "localtime", "/etc/localtime"]
)
def test_an_unknown_zone_is_refused(name):
    with pytest.raises(ValueError, match=r"unknown time zone .* \(an IANA name such as UTC or Europe/Oslo\)"):
        zone(name)


def test_the_day_a_time_falls_on():
    late_evening = datetime(2023, 5, 9, 2, 30)  # naive, as the store keeps it: UTC
    assert local_day(late_evening, UTC) == date(2023, 5, 9)
    assert local_day(late_evening, zone("America/Los_Angeles")) == date(2023, 5, 8)
    assert local_day(late_evening, zone("Asia/Tokyo")) == date(2023, 5, 9)
    aware = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-2)))  # 01:30 UTC the next day
    assert local_day(aware, UTC) == date(2023, 5, 9)
    assert local_day(aware, zone("Europe/Oslo")) == date(2023, 5, 9)


def test_day_words():
    assert day_words(date(2023, 5, 8)) == "8 May 2023"
    assert day_words(datetime(2023, 12, 31, 23, 59)) == "31 December 2023"
