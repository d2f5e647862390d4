"""Cascade forget: a session, a range of its messages, one memory, a whole user. A memory resting
only on what goes is deleted; a shared one loses that evidence and keeps `verified` only if the
rest still verifies it; a session takes its messages; a whole user leaves no row, index point or
file with their words; a dry run lists each place that holds them. Real passes, SQL, Qdrant Edge
(that no byte is left in the files: `test_forget_gone`)."""

from __future__ import annotations

import json

import pytest
from clikit import run, write_chat
from dreamkit import judged_runtime, user_turns
from sqlalchemy import delete
from sqlalchemy import select as sa_select
from sqlmodel import SQLModel, col, select

from dreamer.core.errors import NotFound
from dreamer.core.models import ExperienceEntry, Memory, MemoryEvent, Message, ProjectState, Session, Team
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.engine.markdown import views as markdown
from dreamer.engine.records.cascade import Selection, forget_derived
from dreamer.ingest.store import record_messages
from dreamer.store.db import session_scope

ALICE_WORDS = ("breakfast", "window seats", "jazz")


@pytest.fixture
def rt(settings, engine, scripted, tmp_path):
    runtime = judged_runtime(settings, engine, scripted, tmp_path)
    say(runtime, "alice", "s1", "I prefer tea with breakfast.", "I prefer window seats on trains.")
    say(runtime, "alice", "s2", "I prefer window seats on trains.", "I prefer jazz while working.")
    say(runtime, "bob", "b1", "I prefer bikes to cars.")
    yield runtime
    runtime.close()


def say(rt, user: str, session: str, *lines: str) -> None:
    record_messages(rt.engine, session, user_turns(*lines), user_id=user)
    dream_pass(rt)


def memories(rt, user: str = "alice") -> dict[str, tuple[str, int]]:
    """text -> (status, evidence sessions)"""
    with session_scope(rt.engine) as s:
        rows = s.exec(select(Memory).where(Memory.user_id == user)).all()
        return {m.text: (m.status, len({e["session_id"] for e in m.evidence})) for m in rows}


def ids(rt) -> dict[str, str]:
    with session_scope(rt.engine) as s:
        return {m.text: m.id for m in s.exec(select(Memory))}


def view(rt, user: str = "alice") -> str:
    base = markdown.user_dir(rt.settings.workspace_dir, user)
    return "".join(p.read_text() for p in sorted(base.rglob("*.md")))


TEA, SEATS, JAZZ = (
    "The user prefers tea with breakfast.",
    "The user prefers window seats on trains.",
    "The user prefers jazz while working.",
)


def test_forgetting_a_session_takes_it_and_its_own_memories_and_unlinks_shared_ones(rt):
    assert memories(rt) == {TEA: ("candidate", 1), SEATS: ("verified", 2), JAZZ: ("candidate", 1)}
    known = ids(rt)
    dry = forget_derived(rt, Selection("alice", "s2"), dry_run=True)
    assert (dry.forgotten, dry.unlinked, dry.applied) == ([known[JAZZ]], [known[SEATS]], False)
    assert [p.describe() for p in dry.places] == [
        "sql memory_events: 1",
        "sql memories: 1",
        "sql messages: 8",
        "sql cursors: 1",
        "sql sessions: 1",
        "index points: 1",
        "markdown DREAMS.md: 1",
    ]
    assert memories(rt)[SEATS] == ("verified", 2)  # a dry run changes nothing

    done = forget_derived(rt, Selection("alice", "s2"))
    assert memories(rt) == {TEA: ("candidate", 1), SEATS: ("candidate", 1)}  # jazz is gone, not marked
    assert (done.forgotten, done.unlinked, done.messages, done.sessions) == ([known[JAZZ]], [known[SEATS]], 8, 1)
    with session_scope(rt.engine) as s:
        last = {e.memory_id: (e.event, e.reason) for e in s.exec(select(MemoryEvent).order_by(col(MemoryEvent.id)))}
        left = [sess.external_id for sess in s.exec(select(Session).where(Session.user_id == "alice"))]
    assert last[known[SEATS]] == ("unlink", "forgot session s2") and known[JAZZ] not in last
    assert left == ["s1"]
    payloads = rt.index.payloads(("status",))
    assert known[JAZZ] not in payloads and payloads[known[SEATS]]["status"] == "candidate"
    assert "jazz" not in view(rt) and "window seats" in view(rt)
    assert "jazz" not in sql_text(rt)
    with pytest.raises(NotFound, match="no session s9 of user alice"):
        forget_derived(rt, Selection("alice", "s9"))


def test_forgetting_a_message_range_takes_only_those_lines_out(rt):
    done = forget_derived(rt, Selection("alice", "s2", first=1, last=2))
    assert (done.forgotten, done.unlinked, done.messages, done.sessions) == ([], [ids(rt)[SEATS]], 2, 0)
    assert memories(rt) == {TEA: ("candidate", 1), SEATS: ("candidate", 1), JAZZ: ("candidate", 1)}
    with session_scope(rt.engine) as s:
        s2 = s.exec(select(Session).where(Session.external_id == "s2")).one()
        seqs = [m.seq for m in s.exec(select(Message).where(Message.session_id == s2.id).order_by(col(Message.seq)))]
    assert seqs == [3, 4, 5, 6, 7, 8]


def test_forgetting_one_memory_takes_its_row_history_and_point(rt):
    known = ids(rt)
    with pytest.raises(NotFound, match="no memory nope of user bob"):
        forget_derived(rt, Selection("bob", memory="nope"))
    with pytest.raises(NotFound, match=f"no memory {known[JAZZ]} of user bob"):  # another's memory
        forget_derived(rt, Selection("bob", memory=known[JAZZ]))
    dry = forget_derived(rt, Selection("alice", memory=known[JAZZ][:8]), dry_run=True)
    assert [p.describe() for p in dry.places] == [
        "sql memory_events: 1",
        "sql memories: 1",
        "index points: 1",
        "markdown DREAMS.md: 1",
    ]
    forget_derived(rt, Selection("alice", memory=known[JAZZ][:8]))
    assert memories(rt) == {TEA: ("candidate", 1), SEATS: ("verified", 2)}
    assert known[JAZZ] not in rt.index.all_ids() and "jazz" not in view(rt)
    assert "I prefer jazz while working." in sql_text(rt)  # the conversation stays


def sql_text(rt) -> str:
    """Every value of every row of every table, as text."""
    out = []
    with rt.engine.connect() as conn:
        for table in SQLModel.metadata.sorted_tables:
            out += [repr(tuple(row)) for row in conn.execute(sa_select(table))]
    return "\n".join(out)


def test_forgetting_a_whole_user_leaves_none_of_their_words(rt):
    with session_scope(rt.engine) as s:  # a team and code work of hers too
        s.add(Team(user_id="alice", name="alice-team", leader="lead"))
        s.add(ProjectState(user_id="alice", project="alice-shop", unit="Table", field="checks.tsc"))
        s.add(ExperienceEntry(user_id="alice", project="alice-shop", text="alice's column render lesson"))
    before = sql_text(rt)
    assert all(w in before for w in ALICE_WORDS) and "bikes" in before
    alice_ids = [i for t, i in ids(rt).items() if "bikes" not in t]
    dry = forget_derived(rt, Selection("alice"), dry_run=True)
    assert (sorted(dry.forgotten), dry.sessions, dry.messages) == (sorted(alice_ids), 2, 16)
    assert sql_text(rt) == before

    forget_derived(rt, Selection("alice"))
    outbox.drain(rt)
    after = sql_text(rt)
    assert [w for w in ALICE_WORDS if w in after] == [] and "alice" not in after
    points = rt.index.payloads(("user_id", "text"))
    assert [p["text"] for p in points.values()] == ["The user prefers bikes to cars."]
    assert not markdown.user_dir(rt.settings.workspace_dir, "alice").exists()
    files = "".join(p.read_text() for p in rt.settings.data_dir.rglob("*.md"))
    assert [w for w in ALICE_WORDS if w in files] == [] and "bikes" in view(rt, "bob")
    assert memories(rt, "bob") == {"The user prefers bikes to cars.": ("candidate", 1)}


def test_forget_command(tmp_path):
    chat = tmp_path / "c.jsonl"
    write_chat(chat, *[("user", "I prefer tea."), ("assistant", "ok")] * 4)
    run(tmp_path, "ingest", str(chat), "--user", "u")
    run(tmp_path, "dream")
    dry = run(tmp_path, "forget", "--user", "u", "--session", "c", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert (plan["selection"], len(plan["forgotten"]), plan["applied"]) == ("session c", 1, False)
    done = run(tmp_path, "forget", "--user", "u")
    assert (
        done.stdout
        == "forgot user u: 1 memories forgotten, 0 kept with less evidence, 0 daily notes, 8 messages, 1 sessions\n"
    )
    assert json.loads(run(tmp_path, "memories", "ls", "--status", "all", "--json").stdout) == []
    bad = run(tmp_path, "forget", "--user", "u", "--from", "2")
    assert (bad.returncode, "--from and --to need --session" in bad.stderr) == (2, True)


def test_any_forget_takes_out_points_a_forget_cut_short_left(rt):
    known = ids(rt)
    with session_scope(rt.engine) as s:  # the rows went; the process stopped before the index followed
        s.execute(delete(MemoryEvent).where(col(MemoryEvent.memory_id) == known[JAZZ]))
        s.execute(delete(Memory).where(col(Memory.id) == known[JAZZ]))
    assert known[JAZZ] in rt.index.all_ids()
    forget_derived(rt, Selection("bob"))
    assert rt.index.all_ids() == {known[TEA], known[SEATS]}
    with session_scope(rt.engine) as s:  # every memory marked indexed again, none left waiting
        assert s.exec(select(Memory).where(col(Memory.indexed_at).is_(None))).all() == []
