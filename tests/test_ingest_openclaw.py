"""OpenClaw importer: header, message lines, tool calls and results, skipped line types."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from dreamer.ingest import openclaw

SESSION = "b7300bff-a214-4c11-97ae-eab26883c67a"


def write_jsonl(path: Path, lines: list) -> Path:
    out = bytearray()
    for item in lines:
        out += item if isinstance(item, bytes) else json.dumps(item).encode("utf-8")
        out += b"\n"
    path.write_bytes(bytes(out))
    return path


def msg(message: dict, second: int) -> dict:
    return {
        "type": "message",
        "id": f"m{second}",
        "parentId": None,
        "timestamp": f"2026-04-08T01:04:{second:02d}.000Z",
        "message": message,
    }


def transcript() -> list:
    return [
        {
            "type": "session",
            "version": 3,
            "id": SESSION,
            "timestamp": "2026-04-08T01:03:43.107Z",
            "cwd": "/Users/dana/.openclaw/workspace",
        },
        {
            "type": "model_change",
            "id": "7f59d586",
            "parentId": None,
            "timestamp": "2026-04-08T01:03:43.116Z",
            "provider": "anthropic",
            "modelId": "claude-sonnet-4-6",
        },
        {"type": "thinking_level_change", "id": "9b229e99", "thinkingLevel": "off"},
        {"type": "custom", "customType": "model-snapshot", "data": {}},
        msg({"role": "user", "content": [{"type": "text", "text": "What is in my notes folder?"}]}, 1),
        msg(
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "list the folder"},
                    {"type": "text", "text": "Checking."},
                    {"type": "toolCall", "id": "call_7", "name": "exec", "arguments": {"command": "ls notes"}},
                ],
                "provider": "anthropic",
                "usage": {"input": 10},
            },
            2,
        ),
        msg(
            {
                "role": "toolResult",
                "toolCallId": "call_7",
                "toolName": "exec",
                "content": [{"type": "text", "text": "todo.md\nideas.md"}],
                "isError": False,
            },
            3,
        ),
        msg({"role": "assistant", "content": "Two files: todo.md and ideas.md."}, 4),
        msg({"role": "user", "content": [{"type": "text", "text": "Look:"}, {"type": "image", "data": "..."}]}, 5),
    ]


def test_realistic_transcript(tmp_path):
    path = write_jsonl(tmp_path / "whatever.jsonl", transcript())
    result = openclaw.parse(path, max_message_bytes=10_000)
    assert result.rejections == []
    [session] = result.sessions
    assert session.external_id == SESSION
    assert session.source == "openclaw"
    assert session.project == "workspace"
    assert session.created_at == datetime(2026, 4, 8, 1, 3, 43, 107000, tzinfo=UTC)
    got = [(m.role, m.content, m.line) for m in session.messages]
    assert got == [
        ("user", "What is in my notes folder?", 5),
        ("assistant", "Checking.", 6),
        ("tool", "todo.md\nideas.md", 7),
        ("assistant", "Two files: todo.md and ideas.md.", 8),
        ("user", "Look:\n[image]", 9),
    ]
    call = session.messages[1]
    assert call.tool_calls == [{"id": "call_7", "name": "exec", "arguments": '{"command": "ls notes"}'}]
    result_msg = session.messages[2]
    assert (result_msg.tool_call_id, result_msg.name) == ("call_7", "exec")
    assert session.messages[0].created_at == datetime(2026, 4, 8, 1, 4, 1, tzinfo=UTC)


def test_without_header_uses_stem_and_message_time(tmp_path):
    value = {"type": "message", "message": {"role": "user", "content": "hi", "timestamp": 1770364143489}}
    path = write_jsonl(tmp_path / "abc123.jsonl", [value])
    [session] = openclaw.parse(path, max_message_bytes=100).sessions
    assert session.external_id == "abc123"
    assert session.project is None
    assert session.messages[0].created_at == datetime.fromtimestamp(1770364143.489, tz=UTC)


def test_bad_lines(tmp_path):
    lines = transcript()[:5] + [
        b"oops",
        msg({"role": "narrator", "content": "x"}, 6),
        msg({"role": "user", "content": "q" * 200}, 7),
        b'{"type": "message", "message": {"role": "user", "content": "\xc3\x28"}}',
        msg({"role": "assistant", "content": "kept"}, 8),
    ]
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    result = openclaw.parse(path, max_message_bytes=100)
    assert [m.content for m in result.sessions[0].messages] == ["What is in my notes folder?", "kept"]
    reasons = {r.line: r.reason for r in result.rejections}
    assert sorted(reasons) == [6, 7, 8, 9]
    assert reasons[7] == "unknown role 'narrator'"
    assert "200 bytes" in reasons[8]
