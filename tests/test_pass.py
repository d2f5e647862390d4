"""A pass is one object (`Pass`): its run row, its counts, its model and its leases. Why it
stopped early and which sessions it left due are fields of it, read as fields: the run row's
`error` is a note for a person, never read back."""

from __future__ import annotations

import pytest
from sqlmodel import select

from dreamer.core.errors import LeaseLost
from dreamer.core.models import Cursor, DreamRun, Lease, Session
from dreamer.core.run_status import RunStatus
from dreamer.engine.dream import dream_pass, run_pass
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.load import Work
from dreamer.engine.pace import Pace
from dreamer.engine.runs import OVER_CAP, Pass, StopCause, Tally, start_run
from dreamer.engine.runtime import Runtime
from dreamer.ingest.store import record_messages
from dreamer.store import leases
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope
from dreamer.store.user_locks import LeaseLocks, lock_name

ELSEWHERE = "another worker"
LOCKED_OUT = "1 session(s) left due: another writer kept their user's consolidation lock"


def said(*user_lines: str) -> list[dict]:
    texts = [t for line in user_lines for t in (line, "noted")] + ["ok", "fine"]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


@pytest.fixture
def rt(settings, engine):
    quick = settings.model_copy(update={"extractor": "rules", "min_rounds": 0, "user_lock_wait_seconds": 0})
    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=0, sleep=lambda s: None)
    with Runtime.open(quick, engine=engine, llm=None, embedder=None, busy=AlwaysIdle(), user_locks=locks) as runtime:
        yield runtime


def stored(engine, sid: int) -> Session:
    with session_scope(engine) as s:
        return s.get(Session, sid)


def a_pass(rt: Runtime) -> Pass:
    run = start_run(rt, "test", "rules")
    return Pass(run, None, Pace(lambda: False, leases.RunLease(rt.engine, run.id, "me", 600)))


def test_a_pass_that_left_a_locked_users_session_is_partial_and_says_so_in_its_fields(rt, engine):
    alice = record_messages(engine, "s1", said("I prefer green tea in the morning."), user_id="alice").session_id
    bob = record_messages(engine, "s2", said("I prefer black coffee at night."), user_id="bob").session_id
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)

    dreamed = run_pass(rt, session_ids=[alice, bob])

    assert dreamed.run.status is RunStatus.PARTIAL
    assert (dreamed.tally.locked_out, dreamed.tally.locked_users, dreamed.tally.busy_left) == (1, {"alice"}, 0)
    assert (dreamed.stopped_by, dreamed.left_locked(), dreamed.stopped_busy()) == (None, True, False)
    assert (dreamed.run.sessions, dreamed.run.failed_sessions, dreamed.run.error) == (1, 0, LOCKED_OUT)
    dreamed.run.error = None  # the note is not where the cause is read
    assert dreamed.left_locked()
    with session_scope(engine) as s:
        assert s.get(DreamRun, dreamed.run.id).status is RunStatus.PARTIAL


def test_the_row_dream_pass_returns_is_the_pass_s_row(rt, engine):
    record_messages(engine, "s1", said("I prefer green tea in the morning."), user_id="alice")

    run = dream_pass(rt)

    assert (run.status, run.sessions, run.error) == (RunStatus.OK, 1, None)
    assert run.status is RunStatus.OK


def test_a_pass_asked_to_stop_ends_ok_with_its_cause_a_field(rt, engine):
    sid = record_messages(engine, "s1", said("I prefer green tea in the morning."), user_id="alice").session_id

    dreamed = run_pass(rt, stop=lambda: True)

    assert (dreamed.run.status, dreamed.stopped_by, dreamed.run.error) == (
        RunStatus.OK,
        StopCause.REQUESTED,
        "stopped on request",
    )
    assert (dreamed.run.sessions, dreamed.left_locked(), dreamed.stopped_busy()) == (0, False, False)
    with session_scope(engine) as s:
        assert s.get(Cursor, sid).processed_seq == 0


def test_stopping_for_a_busy_agent_or_the_guard_stops_the_run_and_a_request_does_not(rt):
    busy, guarded, asked = a_pass(rt), a_pass(rt), a_pass(rt)

    busy.stop(StopCause.BUSY, "the agent became busy: 1 request(s) in flight")
    guarded.stop(StopCause.GUARD, "token budget spent")
    asked.stop(StopCause.REQUESTED, "stopped on request")

    assert (busy.run.status, busy.stopped_by, busy.stopped_busy()) == (RunStatus.STOPPED, StopCause.BUSY, True)
    assert (guarded.run.status, guarded.stopped_by, guarded.stopped_busy()) == (
        RunStatus.STOPPED,
        StopCause.GUARD,
        False,
    )
    assert (asked.run.status, asked.stopped_by, asked.stopped_busy()) == (RunStatus.RUNNING, StopCause.REQUESTED, False)
    assert [StopCause.REQUESTED.value, StopCause.BUSY.value, StopCause.GUARD.value] == ["requested", "busy", "guard"]


def test_a_partial_pass_left_busy_sessions_only_when_its_tally_says_so(rt):
    left, failed = a_pass(rt), a_pass(rt)
    left.run.status, left.tally = RunStatus.PARTIAL, Tally(busy_left=2, busy_why="1 request(s) in flight")
    failed.run.status, failed.run.failed_sessions = RunStatus.PARTIAL, 1

    assert (left.stopped_busy(), left.left_locked()) == (True, False)
    assert (failed.stopped_busy(), failed.left_locked()) == (False, False)


def test_a_pass_leases_a_groups_sessions_and_gives_them_back(rt, engine):
    sid = record_messages(engine, "s1", said("I prefer green tea."), user_id="alice").session_id
    p = a_pass(rt)
    sess = stored(engine, sid)

    assert p.lease(rt, sess)
    assert list(p.held) == [sid]
    assert not leases.acquire(engine, leases.session_lease(sid), ELSEWHERE, 600)

    p.release()

    assert p.held == {}
    with session_scope(engine) as s:
        assert s.exec(select(Lease).where(Lease.name == leases.session_lease(sid))).first() is None


def test_a_pass_counts_a_session_done_and_rejects_what_it_left_out(rt, engine):
    sid = record_messages(engine, "s1", said("I prefer green tea."), user_id="alice").session_id
    p = a_pass(rt)
    sess = stored(engine, sid)
    left_out = [
        Candidate(text="The user likes tea.", kind="preference"),
        Candidate(text="The user owns a boat.", kind="profile", ungrounded="no line says it"),
    ]

    p.done(Work(sess, 0, [], 4, 4), left_out)

    assert (p.run.sessions, p.run.messages) == (1, 4)
    assert p.tally.rejected == [
        {"session_id": sid, "text": "The user likes tea.", "reason": OVER_CAP},
        {"session_id": sid, "text": "The user owns a boat.", "reason": "no line says it"},
    ]


def test_a_pass_records_a_sessions_own_failure_drops_a_lost_one_and_raises_a_global_one(rt, engine):
    sid = record_messages(engine, "s1", said("I prefer green tea."), user_id="alice").session_id
    p = a_pass(rt)
    sess = stored(engine, sid)

    p.failed(rt, sess, LeaseLost("lease session:1 is held by another worker"))
    assert p.run.failed_sessions == 0
    p.failed(rt, sess, ValueError("no such day"))
    assert p.run.failed_sessions == 1
    with session_scope(engine) as s:
        cursor = s.get(Cursor, sid)
        assert (cursor.status, cursor.attempts, cursor.last_error) == ("failed", 1, "ValueError: no such day")
    with pytest.raises(OSError):
        p.failed(rt, sess, OSError("disk full"))
    assert (p.run.failed_sessions, p.tally.timed_out) == (1, [])
