"""Ids that no store can hold are refused up front, and calendar edges and deep nesting do not crash an import."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from dreamer.core.errors import IngestError
from dreamer.core.models import Message, Session
from dreamer.ingest.base import LineRejected, json_text, parse_timestamp, project_name, to_json_text
from dreamer.ingest.files import ingest_file
from dreamer.ingest.store import record_messages
from dreamer.store.db import session_scope

MSG = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("field", ["user_id", "agent_id", "project", "team", "external_id"])
@pytest.mark.parametrize("value", ["a\x00b", "\ud800x"])
def test_ids_with_nul_or_lone_surrogates_are_refused_on_every_store(engine, field, value):
    kwargs = {"user_id": "u", field: value}
    external = kwargs.pop("external_id", "s1")
    with pytest.raises(IngestError, match=field):
        record_messages(engine, external, MSG, **kwargs)


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59-01:00", "0001-01-01T00:00:00+01:00", "9999-12-31001-2300"])
def test_timestamps_past_the_calendar_are_unreadable_not_fatal(value):
    assert parse_timestamp(value) is None


def test_project_names_are_cleaned():
    assert project_name("/srv/a\x00b") == "a\ufffdb"


# --- JSON nested past the recursion limit ---------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def claude_line(content: str) -> str:
    return '{"type": "user", "sessionId": "s1", "message": {"role": "user", "content": ' + content + "}}\n"


def stored_counts(engine) -> tuple[int, int]:
    with session_scope(engine) as s:
        return (
            s.exec(select(func.count()).select_from(Session)).scalar_one(),
            s.exec(select(func.count()).select_from(Message)).scalar_one(),
        )


@pytest.mark.parametrize("fmt", ["auto", "locomo", "openai"])
def test_a_document_nested_too_deeply_is_rejected_and_nothing_stored(engine, tmp_path, fmt):
    path = tmp_path / "deep.json"
    path.write_text(DEEP, encoding="utf-8")
    report = ingest_file(engine, path, fmt=fmt, user_id="u")
    where = f"{path}:1" if fmt == "openai" else str(path)
    assert (report.sessions, [str(r) for r in report.rejections]) == ([], [f"{where}: JSON nested too deeply"])
    assert stored_counts(engine) == (0, 0)


def test_an_openai_line_nested_too_deeply_is_rejected_like_malformed_json(engine, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"role": "user", "content": "hi"}\n' + DEEP + "\n", encoding="utf-8")
    report = ingest_file(engine, path, user_id="u")
    assert (report.format, report.added, [str(r) for r in report.rejections]) == (
        "openai",
        1,
        [f"{path}:2: JSON nested too deeply"],
    )
    assert stored_counts(engine) == (1, 1)


def test_a_claude_code_line_nested_too_deeply_is_rejected_like_malformed_json(engine, tmp_path):
    path = tmp_path / "s1.jsonl"
    path.write_text(claude_line('"run the tests"') + claude_line(DEEP) + claude_line('"thanks"'), encoding="utf-8")
    report = ingest_file(engine, path, user_id="u")
    assert (report.format, report.added, [str(r) for r in report.rejections]) == (
        "claude-code",
        2,
        [f"{path}:2: JSON nested too deeply"],
    )
    assert stored_counts(engine) == (1, 2)


def test_a_value_nested_too_deeply_to_write_is_rejected():
    value: list = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(LineRejected, match="^JSON nested too deeply$"):
        to_json_text(value)
    with pytest.raises(LineRejected, match="^JSON nested too deeply$"):
        json_text({"input": value})
