"""Claude Code importer: text, thinking, tool_use and tool_result blocks; skipped line types."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from dreamer.ingest import claude_code

SESSION = "5d0e8a9c-1f2b-4c3d-9e8f-a1b2c3d4e5f6"
CWD = "/home/dev/projects/billing-service"


def write_jsonl(path: Path, lines: list) -> Path:
    out = bytearray()
    for item in lines:
        out += item if isinstance(item, bytes) else json.dumps(item).encode("utf-8")
        out += b"\n"
    path.write_bytes(bytes(out))
    return path


def line(kind: str, message: dict | None = None, second: int = 0, **extra) -> dict:
    value = {
        "parentUuid": None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": SESSION,
        "version": "1.0.51",
        "gitBranch": "main",
        "type": kind,
        "uuid": f"uuid-{kind}-{second}",
        "timestamp": f"2025-06-01T09:00:{second:02d}.000Z",
    }
    if message is not None:
        value["message"] = message
    value.update(extra)
    return value


def transcript() -> list:
    return [
        {"type": "summary", "summary": "Fix rounding in invoice totals", "leafUuid": "uuid-x"},
        line("user", {"role": "user", "content": "Invoice totals are off by one cent. Fix it."}, 1),
        line(
            "assistant",
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4",
                "content": [{"type": "thinking", "thinking": "Probably float math.", "signature": "s"}],
            },
            2,
        ),
        line(
            "assistant",
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look at the totals code."},
                    {
                        "type": "tool_use",
                        "id": "toolu_01",
                        "name": "Read",
                        "input": {"file_path": "/home/dev/projects/billing-service/totals.py"},
                    },
                ],
            },
            3,
        ),
        line(
            "user",
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "def total(xs): return sum(xs)"}
                ],
            },
            4,
            toolUseResult={"type": "text"},
        ),
        line("system", None, 5, content="Running PostToolUse hooks", level="info"),
        line(
            "assistant",
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "toolu_02",
                        "name": "Bash",
                        "input": {"command": "pytest -q " + "x" * 3000},
                    }
                ],
            },
            6,
        ),
        line(
            "user",
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_02",
                        "is_error": True,
                        "content": [{"type": "text", "text": "1 failed"}, {"type": "text", "text": "exit 1"}],
                    },
                    {"type": "text", "text": "Use Decimal please."},
                ],
            },
            7,
        ),
        line("assistant", {"role": "assistant", "content": [{"type": "text", "text": "Switched to Decimal."}]}, 8),
    ]


def test_realistic_transcript(tmp_path):
    path = write_jsonl(tmp_path / f"{SESSION}.jsonl", transcript())
    result = claude_code.parse(path, max_message_bytes=100_000)
    assert result.rejections == []
    [session] = result.sessions
    assert session.external_id == SESSION
    assert session.project == "billing-service"
    assert session.title == "Fix rounding in invoice totals"
    assert session.source == "claude-code"
    assert session.created_at == datetime(2025, 6, 1, 9, 0, 1, tzinfo=UTC)
    got = [(m.role, m.line) for m in session.messages]
    assert got == [
        ("user", 2),
        ("assistant", 4),
        ("tool", 5),
        ("assistant", 7),
        ("tool", 8),
        ("user", 8),
        ("assistant", 9),
    ]
    ask, look, read_result, bash, bash_result, follow_up, done = session.messages
    assert ask.content == "Invoice totals are off by one cent. Fix it."
    assert look.content == (
        "Let me look at the totals code.\n"
        '[tool_use Read: {"file_path": "/home/dev/projects/billing-service/totals.py"}]'
    )
    assert look.tool_calls == [
        {"id": "toolu_01", "name": "Read", "arguments": '{"file_path": "/home/dev/projects/billing-service/totals.py"}'}
    ]
    assert read_result.content == "def total(xs): return sum(xs)"
    assert read_result.tool_call_id == "toolu_01"
    assert read_result.name == "Read"
    assert bash.content.startswith('[tool_use Bash: {"command": "pytest -q xxx')
    assert bash.content.endswith("...]")
    assert len(bash.content) == len("[tool_use Bash: ") + 2000 + len("...]")
    assert json.loads(bash.tool_calls[0]["arguments"])["command"].endswith("x" * 3000)
    assert bash_result.content == "1 failed\nexit 1"
    assert bash_result.meta == {"uuid": "uuid-user-7", "is_error": True}
    assert follow_up.content == "Use Decimal please."
    assert done.content == "Switched to Decimal."
    assert "Probably float math." not in " ".join(m.content for m in session.messages)


def test_external_id_falls_back_to_file_stem(tmp_path):
    value = line("user", {"role": "user", "content": "hi"})
    del value["sessionId"]
    path = write_jsonl(tmp_path / "stem-id.jsonl", [value])
    [session] = claude_code.parse(path, max_message_bytes=1000).sessions
    assert session.external_id == "stem-id"


def test_bad_lines(tmp_path):
    lines = transcript()[:2] + [
        b"{not json",
        line("user", {"role": "operator", "content": "??"}, 10),
        b'{"type": "user", "message": {"role": "user", "content": "\xff\xfe"}}',
        line("user", {"role": "user", "content": "y" * 2000}, 11),
        line("user", None, 12),
        line("assistant", {"role": "assistant", "content": "still here"}, 13),
    ]
    path = write_jsonl(tmp_path / "bad.jsonl", lines)
    result = claude_code.parse(path, max_message_bytes=1000)
    [session] = result.sessions
    assert [m.content for m in session.messages] == ["Invoice totals are off by one cent. Fix it.", "still here"]
    reasons = {r.line: r.reason for r in result.rejections}
    assert sorted(reasons) == [3, 4, 5, 6, 7]
    assert reasons[3].startswith("invalid JSON")
    assert reasons[4] == "unknown role 'operator'"
    assert "UTF-8" in reasons[5]
    assert "over the 1000-byte limit" in reasons[6]
    assert "without a 'message'" in reasons[7]


def test_file_with_only_summaries_has_no_session(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{"type": "summary", "summary": "x", "leafUuid": "u"}])
    result = claude_code.parse(path, max_message_bytes=1000)
    assert result.sessions == [] and result.rejections == []
