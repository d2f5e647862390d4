"""One session's failure is that session's failure: whatever goes wrong while one session is
dreamed (here a message dated at the calendar's edge, written straight into SQL past the ingest
check, that the day logic cannot place in Europe/Oslo) is recorded on its cursor and counted
toward its quarantine, and the pass goes on with the other sessions and users."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from dreamkit import extraction_script, make_index, make_runtime
from sqlalchemy import update
from sqlalchemy.exc import OperationalError
from sqlmodel import select

from dreamer.core.errors import BudgetExceeded, CircuitOpen, IndexFailure, LLMInvalidOutput, StoreError
from dreamer.core.models import Cursor, Memory, Message
from dreamer.engine.dream import dream_pass
from dreamer.engine.failures import is_global
from dreamer.engine.records.reprocess import reprocess
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store.db import session_scope

EDGE = datetime(9999, 12, 31, 23, 30, tzinfo=UTC)
UNPLACEABLE = (
    "CalendarEdge: 9999-12-31T23:30:00+00:00 is too close to the calendar's edge: its day cannot be told"
    " in every time zone (times from 0001-01-02 to 9999-12-30 UTC are kept)"
)


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        srv.set_script(extraction_script())
        yield srv


@pytest.fixture
def rt(settings, engine, server, tmp_path):
    st = settings.model_copy(update={"timezone": "Europe/Oslo", "min_rounds": 1, "max_attempts": 3})
    runtime = make_runtime(st, engine, server, make_index("edge", tmp_path))
    yield runtime
    runtime.close()


def poison(engine, session_id: int) -> None:
    """Date the session's first message at the calendar's edge, as an old store may hold it."""
    with session_scope(engine) as s:
        s.exec(update(Message).where(Message.session_id == session_id, Message.seq == 1).values(created_at=EDGE))


def session_with(line: str) -> list[dict]:
    """One user line worth remembering, then filler, as four rounds."""
    texts = [line, "ok", "sure", "thanks"]
    return [
        m
        for i, t in enumerate(texts)
        for m in ({"role": "user", "content": t}, {"role": "assistant", "content": f"reply {i}"})
    ]


def texts(rt) -> list[tuple[str, str]]:
    with session_scope(rt.engine) as s:
        return sorted((m.user_id, m.text) for m in s.exec(select(Memory)).all())


def cursor(rt, session_id: int) -> Cursor:
    with session_scope(rt.engine) as s:
        c = s.get(Cursor, session_id)
        assert c is not None
        return c


def test_a_poisoned_session_fails_alone_and_is_quarantined_after_max_attempts(rt):
    bad = record_messages(rt.engine, "bad", session_with("I prefer tea."), user_id="alice").session_id
    record_messages(rt.engine, "good", session_with("I prefer coffee."), user_id="alice")
    record_messages(rt.engine, "bob-1", session_with("I prefer jazz."), user_id="bob")
    poison(rt.engine, bad)

    run = dream_pass(rt)

    assert (run.status, run.sessions, run.failed_sessions) == ("partial", 2, 1)
    assert texts(rt) == [("alice", "The user prefers coffee."), ("bob", "The user prefers jazz.")]
    c = cursor(rt, bad)
    assert (c.status, c.attempts, c.processed_seq, c.last_error) == ("failed", 1, 0, UNPLACEABLE)

    seen = []
    for n in (2, 3):  # each pass: another user's new session dreamed beside the poisoned one
        record_messages(rt.engine, f"bob-{n}", session_with(f"I prefer song {n}."), user_id="bob")
        run = dream_pass(rt)
        c = cursor(rt, bad)
        seen.append((run.status, run.sessions, run.failed_sessions, c.status, c.attempts))
    assert seen == [("partial", 1, 1, "failed", 2), ("partial", 1, 1, "quarantined", 3)]
    assert ("bob", "The user prefers song 3.") in texts(rt)

    record_messages(rt.engine, "bob-4", session_with("I prefer blues."), user_id="bob")
    run = dream_pass(rt)  # quarantined: not taken again
    assert (run.status, run.sessions, run.failed_sessions) == ("ok", 1, 0)
    assert cursor(rt, bad).attempts == 3


def test_reprocess_goes_on_past_a_poisoned_session(rt):
    bad = record_messages(rt.engine, "bad", session_with("I prefer tea."), user_id="alice").session_id
    good = record_messages(rt.engine, "good", session_with("I prefer coffee."), user_id="bob").session_id
    poison(rt.engine, bad)

    done = reprocess(rt, [bad, good])

    assert (done.sessions, done.failed, done.added) == (2, 1, 1)
    assert texts(rt) == [("bob", "The user prefers coffee.")]
    assert cursor(rt, bad).last_error == UNPLACEABLE


@pytest.mark.parametrize(
    ("exc", "stops_the_pass"),
    [
        (OverflowError("date value out of range"), False),
        (ValueError("bad data"), False),
        (IndexError("list index out of range"), False),
        (KeyError("seq"), False),
        (LLMInvalidOutput("not the schema"), False),
        (StoreError("no schema"), True),
        (OperationalError("SELECT 1", {}, Exception("database is locked")), True),
        (IndexFailure("refused"), True),
        (CircuitOpen("3 failures"), True),
        (BudgetExceeded("spent"), True),
        (OSError(28, "No space left on device"), True),
        (KeyboardInterrupt(), True),
    ],
)
def test_what_stops_a_pass_and_what_fails_only_its_session(exc, stops_the_pass):
    assert is_global(exc) is stops_the_pass
