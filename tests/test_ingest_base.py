"""Shared importer helpers: rejections, timestamps, text cleaning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dreamer.ingest.base import (
    LineRejected,
    ParsedMessage,
    Rejection,
    check_message,
    clean_text,
    parse_timestamp,
    project_name,
)


def test_rejection_str():
    assert str(Rejection("a.jsonl", 3, "bad")) == "a.jsonl:3: bad"
    assert str(Rejection("a.json", None, "bad")) == "a.json: bad"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("2025-06-01T09:00:05.000Z", datetime(2025, 6, 1, 9, 0, 5, tzinfo=UTC)),
        ("2025-06-01T11:00:05+02:00", datetime(2025, 6, 1, 9, 0, 5, tzinfo=UTC)),
        ("2025-06-01 09:00:05", datetime(2025, 6, 1, 9, 0, 5, tzinfo=UTC)),
        (1748768405, datetime(2025, 6, 1, 9, 0, 5, tzinfo=UTC)),
        (1748768405500, datetime(2025, 6, 1, 9, 0, 5, 500000, tzinfo=UTC)),
        ("1748768405", datetime(2025, 6, 1, 9, 0, 5, tzinfo=UTC)),
        (datetime(2025, 6, 1, 9, 0, 5), datetime(2025, 6, 1, 9, 0, 5, tzinfo=UTC)),
        ("yesterday", None),
        (None, None),
        (True, None),
        ({"x": 1}, None),
    ],
)
def test_parse_timestamp(value, expected):
    got = parse_timestamp(value)
    assert got == expected
    if got is not None:
        assert got.utcoffset() == timedelta(0)


def test_clean_text():
    assert clean_text("plain") == "plain"
    assert clean_text("a\x00b") == "a\ufffdb"
    assert clean_text("x\ud83dy") == "x\ufffdy"
    assert clean_text("\ud83d\ude00") == "\U0001f600"


def test_check_message():
    check_message(ParsedMessage("user", "ok"), 2)
    with pytest.raises(LineRejected, match="unknown role 'bot'"):
        check_message(ParsedMessage("bot", "ok"), 10)
    with pytest.raises(LineRejected, match="3 bytes, over the 2-byte limit"):
        check_message(ParsedMessage("user", "abc"), 2)
    calls = [{"id": "c", "name": "f", "arguments": "x" * 10}]
    with pytest.raises(LineRejected, match="10 bytes"):
        check_message(ParsedMessage("assistant", "", tool_calls=calls), 5)


def test_project_name():
    assert project_name("/home/dev/billing/") == "billing"
    assert project_name("C:\\Users\\dev\\shop") == "shop"
    assert project_name(None) is None
    assert project_name("/") is None
