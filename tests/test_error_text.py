"""JSON errors are told once: "Unterminated string starting at line 1 column 30", never "at at"."""

from __future__ import annotations

import json

import pytest

from dreamer.core.errors import ConfigError, json_reason
from dreamer.ingest.files import ingest_file
from dreamer.online.auth import parse_tokens


def decode_error(text: str) -> json.JSONDecodeError:
    with pytest.raises(json.JSONDecodeError) as caught:
        json.loads(text)
    return caught.value


def test_the_place_follows_the_decoders_message_once():
    assert json_reason(decode_error('{"a": "b'), "column 7") == "Unterminated string starting at column 7"
    assert (
        json_reason(decode_error("{]"), "column 2") == "Expecting property name enclosed in double quotes at column 2"
    )
    assert json_reason(decode_error('"\x01"'), "position 1") == "Invalid control character at position 1"


def test_an_unterminated_string_in_a_transcript_line(engine, tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n{"role": "user", "content": "abc', encoding="utf-8")
    report = ingest_file(engine, path, user_id="u")
    assert report.rejection_lines() == [f"rejected {path}:2: invalid JSON: Unterminated string starting at column 29"]


def test_an_unterminated_string_in_a_locomo_file(engine, tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text('[\n  {"sample_id": "s1', encoding="utf-8")
    report = ingest_file(engine, path, fmt="locomo", user_id=None)
    assert report.rejection_lines() == [
        f"rejected {path}: invalid JSON: Unterminated string starting at line 2 column 17"
    ]


def test_an_unterminated_string_in_the_api_tokens():
    with pytest.raises(ConfigError) as caught:
        parse_tokens('[{"token": "abc')
    assert str(caught.value) == "api_tokens is not valid JSON: Unterminated string starting at position 11"
