"""A memory is valid from when it was said, not from when it was dreamed: an imported 2023
transcript never reads as newer than what the user said in 2026, to the judge or to recall."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from dreamkit import EMBED_DIM, extraction_script, is_judgement, judged_by_word, make_runtime, transcript_lines
from sqlmodel import select

from dreamer.core.models import Memory, Message
from dreamer.engine.dream import dream_pass
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.base import ParsedMessage
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.store.db import session_scope

MAY_2023 = datetime(2023, 5, 1, 10, 0, tzinfo=UTC)
MARCH_2026 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def said(text: str, at: datetime | None, minutes: int = 0) -> list[ParsedMessage]:
    user_at = at.replace(minute=minutes) if at else None
    reply_at = at.replace(minute=minutes + 1) if at else None
    return [ParsedMessage("user", text, created_at=user_at), ParsedMessage("assistant", "Noted.", created_at=reply_at)]


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=EMBED_DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


@pytest.fixture
def rt(settings, sqlite_engine, server, tmp_path):
    runtime = make_runtime(
        settings.model_copy(update={"min_rounds": 1}), sqlite_engine, server, EdgeIndex(tmp_path / "edge", EMBED_DIM)
    )
    yield runtime
    runtime.close()


def memories(rt) -> list[Memory]:
    with session_scope(rt.engine) as s:
        return list(s.exec(select(Memory).order_by(Memory.created_at)).all())


def test_a_memory_of_a_2023_transcript_is_valid_from_2023(rt):
    record_messages(rt.engine, "old", said("I prefer window seats.", MAY_2023, 5), user_id="alice")
    dream_pass(rt, force=True)
    [m] = memories(rt)
    assert m.valid_from.replace(tzinfo=UTC) == datetime(2023, 5, 1, 10, 5, tzinfo=UTC)
    assert m.created_at.year >= 2026  # dreamed now, said then


def test_a_candidate_resting_on_two_lines_is_valid_from_the_later(rt, server):
    msgs = said("I prefer tea.", MAY_2023, 0) + said("Still tea, really.", MAY_2023, 20)
    server.set_script(
        lambda body: Reply.json({"preference": [{"text": "The user prefers tea.", "seqs": [1, 3], "importance": 0.6}]})
    )
    record_messages(rt.engine, "two", msgs, user_id="alice")
    dream_pass(rt, force=True)
    [m] = memories(rt)
    assert m.valid_from.replace(tzinfo=UTC) == datetime(2023, 5, 1, 10, 20, tzinfo=UTC)


def test_a_message_without_a_time_dates_it_when_it_was_recorded(rt):
    record_messages(rt.engine, "now", said("I prefer aisle seats.", None), user_id="alice")
    with session_scope(rt.engine) as s:
        recorded = s.exec(select(Message.created_at).where(Message.seq == 1)).one()
    dream_pass(rt, force=True)
    [m] = memories(rt)
    assert m.valid_from == recorded


def test_the_judge_sees_each_side_dated_by_when_it_was_said(rt, server):
    server.set_script(judged_by_word("coffee"))
    record_messages(rt.engine, "new", said("I prefer tea in the morning.", MARCH_2026), user_id="alice")
    dream_pass(rt, force=True)
    record_messages(rt.engine, "imported", said("I prefer coffee in the morning.", MAY_2023), user_id="alice")
    dream_pass(rt, force=True)
    [judged] = [b for b in server.chat_requests() if is_judgement(b)]
    pairs = judged["messages"][-1]["content"]
    assert "2026-03-01) The user prefers tea in the morning." in pairs
    assert "2023-05-01) The user prefers coffee in the morning." in pairs


def lives_in(body: dict) -> Reply:
    """Every "I live in X" line as the user's home city, a single-valued slot."""
    items = [
        {"text": f"The user lives in {m.group(1)}.", "seqs": [seq], "topic": "home_city", "cardinality": "one"}
        for seq, role, context, text in transcript_lines(body)
        if role == "user" and not context and (m := re.search(r"I live in (\w+)", text))
    ]
    return Reply.json({"profile": items})


def current(rt) -> list[str]:
    return sorted(m.text for m in memories(rt) if m.status in ("candidate", "verified"))


def test_without_a_judge_an_old_transcript_imported_later_never_retires_what_was_said_since(rt, server):
    server.set_script(lives_in)
    record_messages(rt.engine, "new", said("I live in Lisbon.", MARCH_2026), user_id="alice")
    dream_pass(rt, force=True, judge=None)
    record_messages(rt.engine, "imported", said("I live in Leeds.", MAY_2023), user_id="alice")
    run = dream_pass(rt, force=True, judge=None)
    assert current(rt) == ["The user lives in Leeds.", "The user lives in Lisbon."]
    assert run.superseded == 0
    record_messages(rt.engine, "later", said("I live in Porto.", MARCH_2026.replace(month=6)), user_id="alice")
    dream_pass(rt, force=True, judge=None)
    assert "The user lives in Porto." in current(rt) and "The user lives in Lisbon." not in current(rt)


def test_a_statement_said_before_the_current_value_is_kept_beside_it():
    from datetime import date, datetime, timedelta, timezone

    from dreamer.core.consolidate import Decision, in_said_order

    supersede = Decision("supersede", "m1", "newer value of home_city (single-valued, no judgement)")
    kept = in_said_order(supersede, date(2023, 5, 1), [MARCH_2026])
    assert (kept.action, kept.target, kept.reason) == (
        "add",
        None,
        "said 2023-05-01, before the current value (2026-03-01): kept beside",
    )
    assert in_said_order(supersede, date(2026, 3, 1), [MARCH_2026]) is supersede  # the same day: in the order read
    assert in_said_order(supersede, None, [MARCH_2026]) is supersede
    assert in_said_order(supersede, date(2026, 3, 1), []) is supersede
    both = Decision("supersede", "m1", "newer value", also=("m2",))
    later = datetime(2026, 6, 1, 1, 0, tzinfo=timezone(timedelta(hours=5)))  # 31 May in UTC
    kept = in_said_order(both, date(2026, 5, 30), [MARCH_2026, later])  # a value in `also` said since
    assert (kept.action, kept.reason) == ("add", "said 2026-05-30, before the current value (2026-05-31): kept beside")
