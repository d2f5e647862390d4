"""OpenAI JSONL importer: both line shapes, list content, tool calls and bad lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dreamer.core.errors import IngestError
from dreamer.ingest import openai_jsonl


def write_jsonl(path: Path, lines: list) -> Path:
    """Each item is a JSON value, or raw bytes/str written as is."""
    out = bytearray()
    for item in lines:
        if isinstance(item, bytes):
            out += item
        elif isinstance(item, str):
            out += item.encode("utf-8")
        else:
            out += json.dumps(item).encode("utf-8")
        out += b"\n"
    path.write_bytes(bytes(out))
    return path


def test_one_message_per_line(tmp_path):
    path = write_jsonl(
        tmp_path / "chat-42.jsonl",
        [
            {"role": "developer", "content": "Be brief."},
            {
                "role": "user",
                "content": "What's the weather in Paris?",
                "name": "alice",
                "created_at": "2024-03-01T10:00:00Z",
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temp": 12}'},
            {"role": "function", "name": "legacy_fn", "content": "done"},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "It is 12 degrees."},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                    {"type": "text", "text": "Take a coat."},
                ],
                "timestamp": 1709287260,
            },
        ],
    )
    result = openai_jsonl.parse(path, max_message_bytes=1000)
    assert result.rejections == []
    [session] = result.sessions
    assert session.external_id == "chat-42"
    assert session.source == "openai"
    roles = [m.role for m in session.messages]
    assert roles == ["system", "user", "assistant", "tool", "tool", "assistant"]
    first, user, call, tool, legacy, last = session.messages
    assert first.content == "Be brief."
    assert user.name == "alice"
    assert user.created_at == datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
    assert call.content == ""
    assert call.tool_calls == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'}]
    assert tool.tool_call_id == "call_1"
    assert tool.content == '{"temp": 12}'
    assert legacy.name == "legacy_fn"
    assert last.content == "It is 12 degrees.\n[image]\nTake a coat."
    assert last.created_at == datetime(2024, 3, 1, 10, 1, tzinfo=UTC)
    assert [m.line for m in session.messages] == [1, 2, 3, 4, 5, 6]
    assert session.created_at == user.created_at


def test_one_conversation_per_line(tmp_path):
    path = write_jsonl(
        tmp_path / "export.jsonl",
        [
            {
                "id": "conv-a",
                "title": "Trip",
                "messages": [
                    {"role": "system", "content": "You plan trips."},
                    {"role": "user", "content": [{"type": "text", "text": "Plan Rome"}]},
                    {"role": "assistant", "content": "Day 1: Colosseum"},
                ],
            },
            {
                "messages": [
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": "hello",
                        "tool_calls": [
                            {"id": "c9", "type": "function", "function": {"name": "log", "arguments": {"x": 1}}}
                        ],
                    },
                ]
            },
            {"session_id": 77, "messages": [{"role": "user", "content": "numbered id"}]},
        ],
    )
    result = openai_jsonl.parse(path, max_message_bytes=1000)
    assert result.rejections == []
    assert [s.external_id for s in result.sessions] == ["conv-a", "export:2", "77"]
    first, second, third = result.sessions
    assert first.title == "Trip"
    assert [(m.role, m.content) for m in first.messages] == [
        ("system", "You plan trips."),
        ("user", "Plan Rome"),
        ("assistant", "Day 1: Colosseum"),
    ]
    assert all(m.line == 1 for m in first.messages)
    assert second.messages[1].tool_calls == [{"id": "c9", "name": "log", "arguments": '{"x": 1}'}]
    assert third.messages[0].content == "numbered id"


def test_bad_lines_are_rejected_with_line_numbers(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            {"role": "user", "content": "one"},
            '{"role": "user", "content": ',
            {"role": "wizard", "content": "abracadabra"},
            b'{"role": "user", "content": "caf\xe9"}',
            {"role": "user", "content": "x" * 1001},
            "",
            {"role": "assistant", "content": "two"},
            [1, 2, 3],
            {"content": "no role"},
            {"role": "user", "content": 42},
        ],
    )
    result = openai_jsonl.parse(path, max_message_bytes=1000)
    [session] = result.sessions
    assert [m.content for m in session.messages] == ["one", "two"]
    assert [m.line for m in session.messages] == [1, 7]
    lines = {r.line: r.reason for r in result.rejections}
    assert sorted(lines) == [2, 3, 4, 5, 8, 9, 10]
    assert lines[2].startswith("invalid JSON")
    assert "unknown role 'wizard'" in lines[3]
    assert "UTF-8" in lines[4]
    assert "1001 bytes" in lines[5] and "1000-byte limit" in lines[5]
    assert str(result.rejections[0]) == f"{path}:2: {lines[2]}"


def test_bad_message_inside_a_conversation_line(tmp_path):
    path = write_jsonl(
        tmp_path / "conv.jsonl",
        [
            {
                "id": "c1",
                "messages": [
                    {"role": "user", "content": "fine"},
                    {"role": "robot", "content": "nope"},
                    {"role": "assistant", "content": "also fine"},
                ],
            }
        ],
    )
    result = openai_jsonl.parse(path, max_message_bytes=1000)
    [session] = result.sessions
    assert [m.content for m in session.messages] == ["fine", "also fine"]
    [rejection] = result.rejections
    assert rejection.line == 1
    assert rejection.reason == "message 2: unknown role 'robot'"


def test_five_megabyte_message_against_the_default_limit(tmp_path):
    path = write_jsonl(
        tmp_path / "big.jsonl",
        [
            {"role": "user", "content": "before"},
            {"role": "tool", "tool_call_id": "t", "content": "z" * (5 * 1024 * 1024)},
            {"role": "assistant", "content": "after"},
        ],
    )
    result = openai_jsonl.parse(path, max_message_bytes=1_000_000)
    assert [m.content for m in result.sessions[0].messages] == ["before", "after"]
    [rejection] = result.rejections
    assert rejection.line == 2
    assert "5242880 bytes" in rejection.reason


def test_byte_limit_counts_utf8_bytes(tmp_path):
    path = write_jsonl(tmp_path / "u.jsonl", [{"role": "user", "content": "é" * 600}])
    result = openai_jsonl.parse(path, max_message_bytes=1000)
    assert result.sessions == []
    assert "1200 bytes" in result.rejections[0].reason


def test_nul_and_lone_surrogate_are_replaced(tmp_path):
    path = write_jsonl(tmp_path / "n.jsonl", ['{"role": "user", "content": "a\\u0000b\\ud800c"}'])
    [message] = openai_jsonl.parse(path, max_message_bytes=1000).sessions[0].messages
    assert message.content == "a\ufffdb\ufffdc"


def test_unreadable_files_raise(tmp_path):
    with pytest.raises(IngestError, match="cannot read"):
        openai_jsonl.parse(tmp_path / "missing.jsonl", max_message_bytes=1000)
    with pytest.raises(IngestError, match="directory"):
        openai_jsonl.parse(tmp_path, max_message_bytes=1000)


def test_empty_file_gives_nothing(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"\n\n")
    result = openai_jsonl.parse(path, max_message_bytes=1000)
    assert result.sessions == [] and result.rejections == []
