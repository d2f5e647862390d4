"""Format detection and parse_path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dreamer.core.errors import IngestError
from dreamer.ingest import detect


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join(json.dumps(v) + "\n" for v in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "name, lines, expected",
    [
        ("a.jsonl", [{"role": "user", "content": "hi"}], "openai"),
        ("b.jsonl", [{"id": "x", "messages": [{"role": "user", "content": "hi"}]}], "openai"),
        (
            "c.jsonl",
            [
                {"type": "summary", "summary": "s", "leafUuid": "u"},
                {"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "hi"}},
            ],
            "claude-code",
        ),
        ("d.jsonl", [{"type": "session", "id": "s", "timestamp": "2026-01-01T00:00:00Z"}], "openclaw"),
        ("e.jsonl", [{"type": "message", "message": {"role": "user", "content": "hi"}}], "openclaw"),
        ("f.data", [[{"sample_id": "c", "conversation": {}}]], "locomo"),
        ("g.jsonl", [{"sample_id": "c", "conversation": {"speaker_a": "a"}}], "locomo"),
        ("h.jsonl", [{"something": "else"}], "openai"),
    ],
)
def test_detect(tmp_path, name, lines, expected):
    assert detect.detect_format(write_lines(tmp_path / name, lines)) == expected


def test_json_suffix_means_locomo(tmp_path):
    path = tmp_path / "data.json"
    path.write_text('{\n  "sample_id": "c"\n}\n', encoding="utf-8")
    assert detect.detect_format(path) == "locomo"


def test_detect_skips_blank_and_broken_first_lines(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"\n\n{broken\n" + json.dumps({"type": "session", "id": "s"}).encode() + b"\n")
    assert detect.detect_format(path) == "openclaw"


def test_parse_path_by_name_and_auto(tmp_path):
    path = write_lines(tmp_path / "t.jsonl", [{"role": "user", "content": "hi"}])
    assert detect.parse_path(path).sessions[0].messages[0].content == "hi"
    assert detect.parse_path(path, "openai", max_message_bytes=10).sessions[0].external_id == "t"
    assert set(detect.PARSERS) == {"openai", "claude-code", "openclaw", "locomo"}


def test_unknown_format_and_missing_file(tmp_path):
    with pytest.raises(IngestError, match="unknown format 'csv'"):
        detect.parse_path(tmp_path / "x.jsonl", "csv")
    with pytest.raises(IngestError, match="cannot read"):
        detect.parse_path(tmp_path / "missing.jsonl")
    with pytest.raises(IngestError, match="cannot read"):
        detect.parse_path(tmp_path / "missing.json", "locomo")


def test_a_line_nested_too_deeply_is_not_judged(tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    path = tmp_path / "s1.jsonl"
    path.write_text(
        '{"type": "user", "sessionId": "s1", "message": {"role": "user", "content": '
        + deep
        + "}}\n"
        + json.dumps({"type": "user", "sessionId": "s1", "message": {"role": "user", "content": "hi"}})
        + "\n",
        encoding="utf-8",
    )
    assert detect.detect_format(path) == "claude-code"
