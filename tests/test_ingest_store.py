"""Storing transcripts on SQLite and PostgreSQL: recording API, idempotence and file ingest."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from dreamer.core.errors import IngestError
from dreamer.core.models import Cursor, Message, Session
from dreamer.core.tokens import count_tokens
from dreamer.ingest import ParsedMessage, files, ingest_file, record_messages, store
from dreamer.ingest.claude_code import FORMAT as CLAUDE
from dreamer.store import gate
from dreamer.store.db import session_scope


def write_jsonl(path: Path, lines: list) -> Path:
    out = bytearray()
    for item in lines:
        out += item if isinstance(item, bytes) else json.dumps(item).encode("utf-8")
        out += b"\n"
    path.write_bytes(bytes(out))
    return path


def stored(engine, session_id: int) -> list[Message]:
    with session_scope(engine) as s:
        rows = s.exec(select(Message).where(Message.session_id == session_id).order_by(Message.seq)).scalars()
        return list(rows)


def session_row(engine, session_id: int) -> Session:
    with session_scope(engine) as s:
        return s.get(Session, session_id)


def counts(engine) -> tuple[int, int, int]:
    with session_scope(engine) as s:
        return (
            s.exec(select(func.count()).select_from(Session)).scalar_one(),
            s.exec(select(func.count()).select_from(Message)).scalar_one(),
            s.exec(select(func.count()).select_from(Cursor)).scalar_one(),
        )


CHAT = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "I prefer tea over coffee.", "name": "sam"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "save_pref", "arguments": '{"drink": "tea"}'}}
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "saved"},
    {"role": "assistant", "content": "Noted: tea."},
    {"role": "user", "content": [{"type": "text", "text": "Thanks!"}]},
]


# --- record_messages ----------------------------------------------------------------------


def test_record_creates_session_cursor_and_messages(engine):
    result = record_messages(
        engine, "chat-1", CHAT, user_id="u1", agent_id="bot", project="p", team="t", title="Drinks"
    )
    assert (result.external_id, result.added, result.skipped, result.changed) == ("chat-1", 6, 0, False)
    row = session_row(engine, result.session_id)
    assert (row.user_id, row.agent_id, row.project, row.team, row.mode, row.source, row.title) == (
        "u1",
        "bot",
        "p",
        "t",
        "agent",
        "api",
        "Drinks",
    )
    assert (row.message_count, row.rounds, row.last_seq) == (6, 2, 6)
    assert row.updated_at.utcoffset() == timedelta(0)
    with session_scope(engine) as s:
        cursor = s.get(Cursor, result.session_id)
        assert (cursor.processed_seq, cursor.status) == (0, "ok")
    messages = stored(engine, result.session_id)
    assert [(m.seq, m.role, m.content) for m in messages] == [
        (1, "system", "You are helpful."),
        (2, "user", "I prefer tea over coffee."),
        (3, "assistant", ""),
        (4, "tool", "saved"),
        (5, "assistant", "Noted: tea."),
        (6, "user", "Thanks!"),
    ]
    assert messages[1].name == "sam"
    assert messages[2].tool_calls == [{"id": "call_1", "name": "save_pref", "arguments": '{"drink": "tea"}'}]
    assert messages[3].tool_call_id == "call_1"
    assert messages[0].tool_calls is None and messages[0].meta is None
    assert messages[1].content_hash == store.message_hash("user", "sam", "I prefer tea over coffee.", None)
    assert messages[4].token_count == count_tokens("Noted: tea.")
    assert all(m.created_at.utcoffset() == timedelta(0) for m in messages)


def test_record_is_idempotent_and_appends_the_tail(engine):
    first = record_messages(engine, "chat-1", CHAT[:3], user_id="u1")
    again = record_messages(engine, "chat-1", CHAT[:3], user_id="u1")
    assert (again.session_id, again.added, again.skipped) == (first.session_id, 0, 3)
    grown = record_messages(engine, "chat-1", CHAT, user_id="u1")
    assert (grown.added, grown.skipped, grown.changed) == (3, 3, False)
    shorter = record_messages(engine, "chat-1", CHAT[:2], user_id="u1")
    assert (shorter.added, shorter.skipped) == (0, 2)
    assert [m.seq for m in stored(engine, first.session_id)] == [1, 2, 3, 4, 5, 6]
    row = session_row(engine, first.session_id)
    assert (row.message_count, row.rounds, row.last_seq) == (6, 2, 6)
    assert counts(engine) == (1, 6, 1)


def test_changed_transcript_writes_nothing(engine):
    first = record_messages(engine, "chat-1", CHAT[:4], user_id="u1")
    edited = [dict(m) for m in CHAT]
    edited[1]["content"] = "I prefer coffee over tea."
    result = record_messages(engine, "chat-1", edited, user_id="u1")
    assert (result.session_id, result.added, result.skipped, result.changed) == (first.session_id, 0, 0, True)
    assert [m.content for m in stored(engine, first.session_id)][1] == "I prefer tea over coffee."
    assert counts(engine) == (1, 4, 1)


def test_sessions_are_keyed_by_user_source_and_external_id(engine):
    a = record_messages(engine, "same", CHAT[:1], user_id="u1")
    b = record_messages(engine, "same", CHAT[:1], user_id="u2")
    c = record_messages(engine, "same", CHAT[:1], user_id="u1", source="openai")
    assert len({a.session_id, b.session_id, c.session_id}) == 3


def test_parsed_messages_and_validation(engine):
    ok = record_messages(engine, "p", [ParsedMessage("user", "hi", meta={"k": 1})], user_id="u1", mode="code")
    assert stored(engine, ok.session_id)[0].meta == {"k": 1}
    assert session_row(engine, ok.session_id).mode == "code"
    with pytest.raises(IngestError, match="message 2: unknown role 'wizard'"):
        record_messages(
            engine, "v", [{"role": "user", "content": "a"}, {"role": "wizard", "content": "b"}], user_id="u1"
        )
    with pytest.raises(IngestError, match="message 1: .*content"):
        record_messages(engine, "v", [{"role": "user", "content": 5}], user_id="u1")
    with pytest.raises(IngestError, match="expected a dict"):
        record_messages(engine, "v", ["hello"], user_id="u1")
    with pytest.raises(IngestError, match="unknown mode"):
        record_messages(engine, "v", CHAT[:1], user_id="u1", mode="chat")
    with pytest.raises(IngestError, match="user_id is required"):
        record_messages(engine, "v", CHAT[:1], user_id="")
    assert counts(engine) == (1, 1, 1)


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("external_id", "s\x1b[2J", "a control character or a line break"),
        ("user_id", "ada\nbob", "a control character or a line break"),
        ("agent_id", "main\u2028", "a control character or a line break"),
        ("team", "a\tb", "a control character or a line break"),
        ("project", "p\x00", "a NUL character or an unpaired surrogate"),
    ],
)
def test_an_identifier_holds_no_control_character_nor_line_break(engine, field, value, problem):
    ids = {"external_id": "s1", "user_id": "u1", field: value}
    with pytest.raises(IngestError) as caught:
        record_messages(engine, ids.pop("external_id"), CHAT[:1], **ids)
    assert str(caught.value) == f"{field} contains {problem}"
    assert counts(engine) == (0, 0, 0)


def test_nul_characters_are_stored_safely(engine):
    result = record_messages(
        engine, "nul", [{"role": "tool", "content": "bin\x00ary", "tool_call_id": "c"}], user_id="u1"
    )
    assert stored(engine, result.session_id)[0].content == "bin\ufffdary"


def test_caller_session_is_not_committed(engine):
    with pytest.raises(RuntimeError):
        with session_scope(engine) as s:
            result = record_messages(engine, "tx", CHAT, user_id="u1", db_session=s)
            assert result.added == 6
            raise RuntimeError("caller fails after recording")
    assert counts(engine) == (0, 0, 0)
    with session_scope(engine) as s:
        record_messages(engine, "tx", CHAT, user_id="u1", db_session=s)
        again = record_messages(
            engine, "tx", CHAT + [{"role": "assistant", "content": "more"}], user_id="u1", db_session=s
        )
        assert (again.added, again.skipped) == (1, 6)
    assert counts(engine) == (1, 7, 1)


# --- ingest_file ----------------------------------------------------------------------------


def test_ingest_openai_file_with_bad_lines(engine, tmp_path):
    path = write_jsonl(
        tmp_path / "support.jsonl",
        [
            CHAT[0],
            CHAT[1],
            b'{"role": "user", ',
            {"role": "oracle", "content": "?"},
            b'{"role": "user", "content": "\xff"}',
            {"role": "user", "content": "x" * 1001},
            CHAT[4],
        ],
    )
    report = ingest_file(engine, path, user_id="u1", max_message_bytes=1000)
    assert report.format == "openai"
    [result] = report.sessions
    assert (result.external_id, result.added) == ("support", 3)
    assert [(r.line, r.reason.split(":")[0]) for r in report.rejections] == [
        (3, "invalid JSON"),
        (4, "unknown role 'oracle'"),
        (5, "not valid UTF-8 (byte offset 29)"),
        (6, "message is 1001 bytes, over the 1000-byte limit"),
    ]
    messages = stored(engine, result.session_id)
    assert [(m.seq, m.role, m.content) for m in messages] == [
        (1, "system", "You are helpful."),
        (2, "user", "I prefer tea over coffee."),
        (3, "assistant", "Noted: tea."),
    ]
    row = session_row(engine, result.session_id)
    assert (row.source, row.user_id, row.mode, row.message_count, row.rounds) == ("openai", "u1", "agent", 3, 1)

    second = ingest_file(engine, path, user_id="u1", max_message_bytes=1000)
    assert (second.added, second.skipped) == (0, 3)
    assert counts(engine) == (1, 3, 1)


def test_ingest_five_megabyte_message_against_default_limit(engine, tmp_path):
    path = write_jsonl(
        tmp_path / "big.jsonl",
        [
            {"role": "user", "content": "cat the log"},
            {"role": "tool", "tool_call_id": "c1", "content": "L" * (5 * 1024 * 1024)},
            {"role": "assistant", "content": "The log is huge."},
        ],
    )
    report = ingest_file(engine, path, user_id="u1", max_message_bytes=1_000_000)
    assert report.added == 2
    [rejection] = report.rejections
    assert rejection.line == 2 and "over the 1000000-byte limit" in rejection.reason
    assert [m.content for m in stored(engine, report.sessions[0].session_id)] == ["cat the log", "The log is huge."]


def test_grown_and_changed_files(engine, tmp_path):
    def conv(cid, texts):
        return {
            "id": cid,
            "messages": [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)],
        }

    path = tmp_path / "export.jsonl"
    write_jsonl(path, [conv("a", ["a1", "a2"]), conv("b", ["b1", "b2"])])
    first = ingest_file(engine, path, user_id="u1")
    assert [(r.external_id, r.added) for r in first.sessions] == [("a", 2), ("b", 2)]

    write_jsonl(path, [conv("a", ["a1 edited", "a2", "a3"]), conv("b", ["b1", "b2", "b3", "b4"])])
    second = ingest_file(engine, path, user_id="u1")
    assert [(r.external_id, r.added, r.skipped, r.changed) for r in second.sessions] == [
        ("a", 0, 0, True),
        ("b", 2, 2, False),
    ]
    [rejection] = second.rejections
    assert rejection.line is None
    assert rejection.reason == f"session a: {store.CHANGED_REASON}"
    assert [m.content for m in stored(engine, second.sessions[0].session_id)] == ["a1", "a2"]
    b_messages = stored(engine, second.sessions[1].session_id)
    assert [(m.seq, m.content) for m in b_messages] == [(1, "b1"), (2, "b2"), (3, "b3"), (4, "b4")]
    assert counts(engine) == (2, 6, 2)


def test_ingest_file_is_all_or_nothing(engine, tmp_path, monkeypatch):
    path = write_jsonl(
        tmp_path / "two.jsonl",
        [
            {"id": "one", "messages": [{"role": "user", "content": "first"}]},
            {"id": "two", "messages": [{"role": "user", "content": "second"}]},
        ],
    )
    real = files.record_session
    calls = []

    def crash_on_second(s, target, messages, **options):
        calls.append(target.external_id)
        if len(calls) == 2:
            raise OSError("disk vanished")
        return real(s, target, messages, **options)

    monkeypatch.setattr(files, "record_session", crash_on_second)
    with pytest.raises(OSError):
        ingest_file(engine, path, user_id="u1")
    assert counts(engine) == (0, 0, 0)
    monkeypatch.setattr(files, "record_session", real)
    assert ingest_file(engine, path, user_id="u1").added == 2


def test_ingest_claude_code_defaults(engine, tmp_path):
    base = {"sessionId": "cc-1", "cwd": "/srv/acme-api", "timestamp": "2025-06-01T09:00:00Z"}
    path = write_jsonl(
        tmp_path / "cc-1.jsonl",
        [
            {**base, "type": "user", "uuid": "1", "message": {"role": "user", "content": "run tests"}},
            {
                **base,
                "type": "assistant",
                "uuid": "2",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "hmm"},
                        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest"}},
                    ],
                },
            },
            {
                **base,
                "type": "user",
                "uuid": "3",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "3 passed"}],
                },
            },
        ],
    )
    report = ingest_file(engine, path, user_id="dev")
    assert report.format == CLAUDE
    row = session_row(engine, report.sessions[0].session_id)
    assert (row.external_id, row.source, row.mode, row.project, row.rounds) == (
        "cc-1",
        "claude-code",
        "code",
        "acme-api",
        1,
    )
    assert [(m.seq, m.role, m.tool_call_id) for m in stored(engine, row.id)] == [
        (1, "user", None),
        (2, "assistant", None),
        (3, "tool", "t1"),
    ]
    other = ingest_file(engine, path, user_id="dev2", project="override", mode="agent")
    row2 = session_row(engine, other.sessions[0].session_id)
    assert (row2.project, row2.mode) == ("override", "agent")


def test_ingest_locomo_user_ids(engine, tmp_path):
    data = [
        {
            "sample_id": f"conv-{n}",
            "conversation": {
                "speaker_a": "A",
                "speaker_b": "B",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "A", "dia_id": "D1:1", "text": "hi"},
                    {"speaker": "B", "dia_id": "D1:2", "text": "hey"},
                ],
                "session_10_date_time": "1:56 pm on 9 May, 2023",
                "session_10": [{"speaker": "B", "dia_id": "D10:1", "text": "later", "blip_caption": "a cat"}],
            },
        }
        for n in (1, 2)
    ]
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    report = ingest_file(engine, path, user_id=None)
    assert report.format == "locomo"
    assert [r.external_id for r in report.sessions] == [
        "conv-1:session_1",
        "conv-1:session_10",
        "conv-2:session_1",
        "conv-2:session_10",
    ]
    rows = [session_row(engine, r.session_id) for r in report.sessions]
    assert [(r.user_id, r.title, r.mode) for r in rows] == [
        ("conv-1", "session 1", "agent"),
        ("conv-1", "session 10", "agent"),
        ("conv-2", "session 1", "agent"),
        ("conv-2", "session 10", "agent"),
    ]
    later = stored(engine, rows[1].id)[0]
    assert (later.role, later.name, later.content, later.meta) == (
        "assistant",
        "B",
        "later [image: a cat]",
        {"dia_id": "D10:1"},
    )
    assert ingest_file(engine, path, user_id=None).added == 0
    assert ingest_file(engine, path, user_id="bench").added == 6
    assert counts(engine) == (8, 12, 8)


def test_ingest_needs_a_user_id(engine, tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [CHAT[1]])
    with pytest.raises(IngestError, match="no user id"):
        ingest_file(engine, path, user_id=None)
    with pytest.raises(IngestError, match="cannot read"):
        ingest_file(engine, tmp_path / "missing.jsonl", user_id="u1")
    assert counts(engine) == (0, 0, 0)


def test_many_messages_in_batches(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(store, "INSERT_BATCH", 100)
    lines = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(2500)]
    path = write_jsonl(tmp_path / "long.jsonl", lines)
    report = ingest_file(engine, path, user_id="u1")
    assert report.added == 2500
    row = session_row(engine, report.sessions[0].session_id)
    assert (row.message_count, row.rounds, row.last_seq) == (2500, 1250, 2500)
    write_jsonl(path, lines + [{"role": "user", "content": "one more"}])
    again = ingest_file(engine, path, user_id="u1")
    assert (again.added, again.skipped) == (1, 2500)
    assert stored(engine, row.id)[-1].seq == 2501


def test_concurrent_writers_of_one_session(engine):
    transcript = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(60)]
    results, errors = [], []

    def writer() -> None:
        for end in range(6, 61, 6):
            try:
                results.append(record_messages(engine, "shared", transcript[:end], user_id="u1"))
            except Exception as exc:  # collected so the assertion below names it
                errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sum(r.added for r in results) == 60
    assert len({r.session_id for r in results}) == 1
    assert [m.seq for m in stored(engine, results[0].session_id)] == list(range(1, 61))
    assert counts(engine) == (1, 60, 1)


@pytest.mark.parametrize("record", [record_messages, store.append_messages])
def test_a_message_over_the_size_limit_refuses_the_whole_call(engine, record):
    from dreamer.core.errors import TooLarge

    messages = [{"role": "user", "content": "short"}, {"role": "assistant", "content": "é" * 6}]  # 12 bytes
    with pytest.raises(TooLarge) as caught:
        record(engine, "sized", messages, user_id="u", max_message_bytes=11)
    assert str(caught.value) == (
        "message 2 of 2 refused (message is 12 bytes, over the 11-byte limit, max_message_bytes): nothing was stored"
    )
    with session_scope(engine) as s:
        assert s.exec(select(func.count()).select_from(Session)).one() == (0,)
    assert record(engine, "sized", messages, user_id="u", max_message_bytes=12).added == 2


def test_an_answer_in_a_later_batch_to_a_question_that_asked_for_a_secret_is_stored_redacted(engine):
    """The question closes one recorded batch, the answer opens the next: the answer is read
    against the session's last stored message."""
    asked = [{"role": "assistant", "content": "¿Cuál es la clave del portátil?"}]
    first = record_messages(engine, "chat-asked-later", asked, user_id="u1")
    later = asked + [{"role": "user", "content": "Nube.Gris-204"}, {"role": "user", "content": "Nube.Gris-204"}]
    record_messages(engine, "chat-asked-later", later, user_id="u1")
    assert [m.content for m in stored(engine, first.session_id)] == [
        "¿Cuál es la clave del portátil?",
        "[REDACTED:password]",
        "Nube.Gris-204",
    ]


def test_a_batch_of_several_sessions_reads_each_message_against_its_own_sessions(engine):
    asked = record_messages(
        engine, "mix-a", [{"role": "assistant", "content": "What's the PIN for the safe?"}], user_id="u1"
    )
    other = record_messages(engine, "mix-b", [{"role": "user", "content": "How was the match?"}], user_id="u1")
    now = datetime.now(UTC)

    def row(session_id: int, text: str) -> dict:
        return dict(
            session_id=session_id, seq=2, role="user", content=text, content_hash=text, created_at=now, token_count=1
        )

    with session_scope(engine) as s:
        gate.insert_messages(s, [row(other.session_id, "7391"), row(asked.session_id, "2580")])
    assert [m.content for m in stored(engine, other.session_id)] == ["How was the match?", "7391"]
    assert [m.content for m in stored(engine, asked.session_id)] == ["What's the PIN for the safe?", "[REDACTED:pin]"]


def test_an_answer_to_a_question_that_asked_for_a_secret_is_stored_redacted(engine):
    said = [
        {"role": "assistant", "content": "What's the PIN for the alarm?"},
        {"role": "user", "content": "4417"},
        {"role": "assistant", "content": "How many guests are coming?"},
        {"role": "user", "content": "12"},
    ]
    result = record_messages(engine, "chat-asked", said, user_id="u1")
    assert [m.content for m in stored(engine, result.session_id)] == [
        "What's the PIN for the alarm?",
        "[REDACTED:pin]",
        "How many guests are coming?",
        "12",
    ]
