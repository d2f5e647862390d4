"""Writes by the agent go through the dreamer's consolidation: a duplicate merges, a
contradiction judged by the model supersedes, a forgotten memory stays forgotten."""

from __future__ import annotations

import pytest
from dreamkit import chat_bodies, extraction_script, make_index, make_runtime
from onlinekit import chat
from sqlmodel import select

from dreamer.core.errors import NotFound
from dreamer.core.models import Memory, MemoryEvent
from dreamer.core.scope import Scope
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.agent_writes import WriteRejected, forget_memory, remember
from dreamer.online.recall import recall
from dreamer.online.session_append import append
from dreamer.store import cabinet
from dreamer.store.db import session_scope
from dreamer.store.user_locks import ProcessLocks, UserLocked

ALICE = Scope(user_id="alice")


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        srv.set_script(extraction_script(verdict="contradicts"))
        yield srv


@pytest.fixture
def rt(settings, sqlite_engine, server, tmp_path):
    runtime = make_runtime(settings, sqlite_engine, server, make_index("edge", tmp_path), llm=False)
    yield runtime
    runtime.close()


def events(rt, memory_id: str) -> list[tuple[str, str | None]]:
    with session_scope(rt.engine) as s:
        rows = s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == memory_id).order_by(MemoryEvent.id))
        return [(e.event, e.reason) for e in rows]


def current(rt, user_id: str = "alice") -> list[Memory]:
    with session_scope(rt.engine) as s:
        return cabinet.current_memories(s, user_id)


def test_remembering_twice_is_one_memory_with_a_merge_in_its_history(rt):
    first = remember(rt, ALICE, "The user prefers short answers.").memory
    second = remember(rt, ALICE, "the user prefers SHORT answers!").memory

    assert second.id == first.id
    [m] = current(rt)
    assert (m.kind, m.source, m.status) == ("preference", "agent", "candidate")
    assert events(rt, m.id) == [("add", "no neighbour"), ("merge", "same content")]
    assert m.indexed_at is not None
    assert [h.memory_id for h in recall(rt, "short answers", ALICE).hits] == [m.id]
    dreams = next(rt.settings.workspace_dir.glob("*/DREAMS.md")).read_text()
    assert f"id:{m.id}" in dreams


def test_evidence_from_two_sessions_verifies_an_agent_memory(rt):
    s1 = append(rt, ALICE, "chat-1", chat("I like short answers.")).session_id
    s2 = append(rt, ALICE, "chat-2", chat("Keep it short please.")).session_id
    remember(rt, ALICE, "The user prefers short answers.", session_id=s1)
    m = remember(rt, ALICE, "The user prefers short answers.", session_id=s2).memory
    assert m.status == "verified"
    assert [e["external_id"] for e in m.evidence] == ["chat-1", "chat-2"]
    memory_md = next(rt.settings.workspace_dir.glob("*/MEMORY.md")).read_text()
    assert f"id:{m.id}" in memory_md


def test_a_session_of_another_user_is_not_evidence(rt):
    bobs = append(rt, Scope("bob"), "chat-b", chat("hello")).session_id
    with pytest.raises(NotFound):
        remember(rt, ALICE, "The user prefers tea.", session_id=bobs)
    assert current(rt) == []


def test_a_contradiction_judged_by_the_model_supersedes(settings, sqlite_engine, server, tmp_path):
    st = settings.model_copy(update={"ambiguous_low": 0.3, "dup_threshold": 0.99})
    rt = make_runtime(st, sqlite_engine, server, make_index("edge", tmp_path), llm=True)
    try:
        old = remember(rt, ALICE, "The user prefers tea with breakfast.").memory
        new = remember(rt, ALICE, "The user prefers coffee with breakfast.").memory
        assert len(chat_bodies(server)) == 1  # one batched judgement
        assert [m.id for m in current(rt)] == [new.id]
        with session_scope(rt.engine) as s:
            assert (s.get(Memory, old.id).status, s.get(Memory, old.id).superseded_by) == ("superseded", new.id)
    finally:
        rt.close()


def test_a_write_holds_its_users_consolidation_lock_and_stores_nothing_without_it(
    settings, sqlite_engine, server, tmp_path
):
    """The embedded index this process owns: the lock is the process's own (a hosted pass of
    `dreamer serve` holding it is stood in for by this thread)."""
    quick = settings.model_copy(update={"user_lock_wait_seconds": 0})
    index = make_index("edge", tmp_path)
    rt = make_runtime(quick, sqlite_engine, server, index, llm=False)
    elsewhere = ProcessLocks(wait_seconds=0)
    try:
        assert isinstance(rt.user_locks, ProcessLocks)
        with elsewhere.hold("alice"):
            with pytest.raises(UserLocked, match="^user 'alice': another writer kept consolidating their memories"):
                remember(rt, ALICE, "The user prefers short answers.")
        assert current(rt) == []

        m = remember(rt, ALICE, "The user prefers short answers.").memory
        with elsewhere.hold("alice"):
            with pytest.raises(UserLocked):
                forget_memory(rt, ALICE, m.id, "asked to")
        assert [c.id for c in current(rt)] == [m.id]
        with elsewhere.hold("bob"):  # another user's lock is another lock
            assert remember(rt, ALICE, "The user prefers tea.").memory.text == "The user prefers tea."
    finally:
        rt.close()
        index.close()


def test_forget_keeps_history_and_leaves_recall(rt):
    m = remember(rt, ALICE, "The user prefers dark mode.").memory
    forgotten = forget_memory(rt, ALICE, m.id, "the user changed their mind")

    assert forgotten.status == "forgotten"
    assert events(rt, m.id)[-1] == ("forget", "the user changed their mind")
    assert recall(rt, "dark mode", ALICE).hits == []
    assert recall(rt, "dark mode", ALICE, include_all=True).hits[0].status == "forgotten"
    with pytest.raises(WriteRejected, match="forgot"):
        remember(rt, ALICE, "The user prefers dark mode.")


def test_a_forget_holds_in_its_own_scope_and_says_nothing_to_another(rt):
    """What one team forgot neither blocks another team's write nor tells it the text existed."""
    t1, t2 = Scope("alice", team="t1"), Scope("alice", team="t2")
    forget_memory(rt, t1, remember(rt, t1, "The user's salary is 90k.").memory.id, "private")

    theirs = remember(rt, t2, "The user's salary is 90k.").memory

    assert (theirs.team, theirs.status) == ("t2", "candidate")
    with pytest.raises(WriteRejected, match="forgot"):
        remember(rt, t1, "The user's salary is 90k.")


def test_a_forget_holds_for_the_wider_scope_that_made_it(rt):
    """A token that sees every team forgot a team's memory: it may not store the text again either."""
    team, wide = Scope("alice", agent_id="main", team="t1"), Scope("alice", agent_id="main")
    forget_memory(rt, wide, remember(rt, team, "The user's salary is 90k.").memory.id, "private")

    with pytest.raises(WriteRejected, match="forgot"):
        remember(rt, wide, "The user's salary is 90k.")


def test_forget_outside_the_scope_is_not_found(rt):
    m = remember(rt, Scope("bob"), "Bob prefers vim.").memory
    with pytest.raises(NotFound):
        forget_memory(rt, ALICE, m.id, "not mine")
    with pytest.raises(NotFound):
        forget_memory(rt, Scope("bob", agent_id="other-agent"), m.id, "not this agent's")
    assert [x.status for x in current(rt, "bob")] == ["candidate"]


@pytest.mark.parametrize(("text", "kind"), [("x", "preference"), ("The user is on the team.", "decision")])
def test_invalid_writes_are_rejected(rt, text, kind):
    with pytest.raises(WriteRejected):
        remember(rt, ALICE, text, kind)
    assert current(rt) == []


def test_writes_consolidate_within_the_writers_own_scope(rt):
    planner, helper = Scope("alice", agent_id="planner"), Scope("alice", agent_id="helper")
    a = remember(rt, planner, "The user prefers window seats.").memory
    b = remember(rt, helper, "The user prefers window seats.").memory
    again = remember(rt, planner, "The user prefers window seats.").memory
    assert a.id != b.id and again.id == a.id
    assert (a.agent_id, b.agent_id) == ("planner", "helper")
