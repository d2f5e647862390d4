"""A run undone, and the guard: real passes (the real openai client over HTTP to the scripted
server), a real store (SQLite, PostgreSQL) and Qdrant Edge; the index and the Markdown follow."""

from __future__ import annotations

import pytest
from dreamkit import judged_by_word, make_index, make_runtime, user_turns
from sqlmodel import col, select

from dreamer.core.changeset import Conflict
from dreamer.core.errors import NotFound, RunInProgress
from dreamer.core.models import CURRENT_STATUSES, Memory, MemoryEvent, Session
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.engine.records.reprocess import reprocess
from dreamer.engine.records.revert import accept_run, held_runs, revert_run, run_changes
from dreamer.engine.runs import start_run
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store import cabinet
from dreamer.store.db import session_scope


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        yield srv


@pytest.fixture
def rt(settings, engine, server, tmp_path):
    st = settings.model_copy(
        update={"ambiguous_low": 0.3, "route_max_pairs": 1, "dup_threshold": 0.99, "entries_per_session": 10}
    )
    runtime = make_runtime(st, engine, server, make_index("edge", tmp_path))
    yield runtime
    runtime.close()


def current(rt, user: str = "alice") -> list[tuple]:
    with session_scope(rt.engine) as s:
        rows = cabinet.current_memories(s, user)
        return sorted((m.id, m.text, m.status, m.evidence, m.importance, m.last_seen, m.updated_at) for m in rows)


def files(rt) -> dict[str, str]:
    ws = rt.settings.workspace_dir
    return {str(p.relative_to(ws)): p.read_text() for p in sorted(ws.rglob("*.md"))}


def indexed_current(rt) -> dict[str, dict]:
    """The index's own payloads of the memories it holds as current."""
    payloads = rt.index.payloads(outbox.CHECKED_FIELDS)
    return {mid: p for mid, p in payloads.items() if p["status"] in CURRENT_STATUSES}


def revert(rt, run_id: int, **kw):
    result = revert_run(rt.engine, run_id, **kw)
    outbox.drain(rt, users=result.users)  # as `dreamer runs revert` does
    return result


def events(rt) -> list[tuple[str, str, int | None]]:
    with session_scope(rt.engine) as s:
        return [(e.memory_id, e.event, e.run_id) for e in s.exec(select(MemoryEvent).order_by(col(MemoryEvent.id)))]


def dream_before_and_after(rt, server):
    """Run 1 stores tea and window seats; run 2 supersedes tea (coffee), merges window seats and adds jazz."""
    server.set_script(judged_by_word("coffee"))
    record_messages(
        rt.engine,
        "s1",
        user_turns("I prefer tea with breakfast.", "I prefer window seats on trains."),
        user_id="alice",
    )
    first = dream_pass(rt)
    assert (first.added, first.merged, first.superseded) == (2, 0, 0)
    before = (current(rt), files(rt), indexed_current(rt))
    record_messages(
        rt.engine,
        "s2",
        user_turns(
            "I prefer coffee with breakfast.", "I prefer window seats on trains.", "I prefer jazz while working."
        ),
        user_id="alice",
    )
    second = dream_pass(rt)
    assert (second.added, second.merged, second.superseded, second.held) == (2, 1, 1, 0)
    return first, second, before


def test_reverting_a_run_restores_the_memories_the_index_and_the_markdown(rt, server):
    _first, second, before = dream_before_and_after(rt, server)
    assert current(rt) != before[0]
    changes = run_changes(rt.engine, second.id)
    assert sorted((c.change.event, c.text) for c in changes) == [
        ("add", "The user prefers coffee with breakfast."),
        ("add", "The user prefers jazz while working."),
        ("merge", "The user prefers window seats on trains."),
        ("supersede", "The user prefers tea with breakfast."),
    ]

    dry = revert_run(rt.engine, second.id, dry_run=True)
    assert (dry.applied, len(dry.undone), dry.conflicts) == (False, 4, [])
    assert current(rt) != before[0]  # a dry run changes nothing

    result = revert(rt, second.id)

    assert (result.applied, len(result.undone), result.already, result.users) == (True, 4, 0, ["alice"])
    assert (current(rt), files(rt), indexed_current(rt)) == before
    assert outbox.check(rt).clean
    with session_scope(rt.engine) as s:
        reverted = s.exec(select(Memory.text).where(Memory.status == "reverted").order_by(Memory.text)).all()
        reasons = set(s.exec(select(MemoryEvent.reason).where(MemoryEvent.event == "revert")).all())
    assert reverted == ["The user prefers coffee with breakfast.", "The user prefers jazz while working."]
    assert reasons == {f"revert of run {second.id}"}
    assert [c.undone for c in run_changes(rt.engine, second.id)] == [True] * 4

    history = events(rt)
    again = revert(rt, second.id)

    assert (again.applied, again.undone, again.already) == (False, [], 4)
    assert events(rt) == history
    assert (current(rt), files(rt)) == before[:2]


def test_a_revert_across_a_later_run_stops_and_names_the_conflict_unless_forced(rt, server):
    _first, second, before = dream_before_and_after(rt, server)
    record_messages(rt.engine, "s3", user_turns("I prefer jazz while working."), user_id="alice")
    third = dream_pass(rt)
    assert (third.added, third.merged) == (0, 1)
    jazz = next(m for m in current(rt) if "jazz" in m[1])[0]
    merge_event = next(
        i for i, (mid, ev, run) in enumerate(events(rt), start=1) if (mid, ev, run) == (jazz, "merge", third.id)
    )
    snapshot = (current(rt), files(rt), events(rt))

    stopped = revert(rt, second.id)

    assert (stopped.applied, stopped.conflicts) == (False, [Conflict(jazz, third.id, "merge", merge_event)])
    assert (current(rt), files(rt), events(rt)) == snapshot

    forced = revert(rt, second.id, force=True)

    assert (forced.applied, len(forced.undone)) == (True, 4)
    assert current(rt) == before[0]
    assert files(rt) == before[1]
    assert outbox.check(rt).clean


def test_the_guard_holds_a_pass_that_would_supersede_most_memories_and_accept_applies_it(rt, server):
    server.set_script(judged_by_word("now"))
    topics = [
        "breakfast drinks",
        "weekend hiking",
        "evening reading",
        "office music",
        "winter holidays",
        "lunch salads",
    ]
    record_messages(rt.engine, "s1", user_turns(*[f"I prefer plain {t}" for t in topics[:4]]), user_id="alice")
    record_messages(rt.engine, "s2", user_turns(*[f"I prefer plain {t}" for t in topics[4:]]), user_id="alice")
    dream_pass(rt)
    old = current(rt)
    assert len(old) == 6
    record_messages(rt.engine, "s3", user_turns(*[f"I prefer fancy {t} now" for t in topics[:5]]), user_id="alice")

    run = dream_pass(rt)

    assert (run.added, run.superseded, run.held) == (5, 0, 5)  # five of six is over max(4, 25 %)
    statuses = {text: status for _id, text, status, *_rest in current(rt)}
    assert len(statuses) == 11
    assert sorted(s for t, s in statuses.items() if "plain" in t) == ["candidate"] + ["review_required"] * 5
    assert held_runs(rt.engine) == {run.id: 5}
    assert "status:review_required" in (next(rt.settings.workspace_dir.glob("*/DREAMS.md"))).read_text()

    accepted = accept_run(rt.engine, run.id)
    outbox.drain(rt, users=accepted.users)

    assert (len(accepted.applied), accepted.skipped) == (5, [])
    assert sorted(t for _id, t, *_rest in current(rt)) == sorted(
        [f"The user prefers fancy {t} now." for t in topics[:5]] + [f"The user prefers plain {t}." for t in topics[5:]]
    )
    assert held_runs(rt.engine) == {}
    assert accept_run(rt.engine, run.id).applied == []  # accepted once
    assert outbox.check(rt).clean

    undone = revert(rt, run.id)  # the accepted supersessions, the holds and the adds, all undone
    assert (undone.applied, len(undone.undone)) == (True, 15)
    assert current(rt) == old


def test_a_held_change_dropped_by_a_revert_restores_the_status_before(rt, server):
    server.set_script(judged_by_word("now"))
    topics = ["breakfast drinks", "weekend hiking", "evening reading", "office music", "winter holidays"]
    record_messages(rt.engine, "s1", user_turns(*[f"I prefer plain {t}" for t in topics]), user_id="alice")
    dream_pass(rt)
    old = current(rt)
    record_messages(rt.engine, "s2", user_turns(*[f"I prefer fancy {t} now" for t in topics]), user_id="alice")
    run = dream_pass(rt)
    assert run.held == 5

    revert(rt, run.id)

    assert current(rt) == old
    assert held_runs(rt.engine) == {}
    assert accept_run(rt.engine, run.id).applied == []  # nothing left to accept


def test_a_run_still_running_is_neither_reverted_nor_accepted(rt):
    run = start_run(rt, "manual", "rules")
    with pytest.raises(RunInProgress, match=f"run {run.id} is still running: wait until it has finished"):
        revert_run(rt.engine, run.id)
    with pytest.raises(RunInProgress):
        accept_run(rt.engine, run.id)
    with pytest.raises(NotFound, match="no run 99"):
        revert_run(rt.engine, 99)


def test_reprocessing_after_a_revert_learns_the_reverted_memories_again(rt, server):
    _first, second, _before = dream_before_and_after(rt, server)
    revert(rt, second.id)
    with session_scope(rt.engine) as s:
        s2 = s.exec(select(Session.id).where(Session.external_id == "s2")).one()

    done = reprocess(rt, [s2])

    assert (done.added, done.merged) == (2, 1)  # a reverted memory is not refused like a forgotten one
    assert sorted(t for _id, t, *_rest in current(rt)) == [
        "The user prefers coffee with breakfast.",
        "The user prefers jazz while working.",
        "The user prefers window seats on trains.",
    ]


def test_accept_leaves_a_held_change_whose_successor_is_gone(rt, server):
    server.set_script(judged_by_word("now"))
    topics = ["breakfast drinks", "weekend hiking", "evening reading", "office music", "winter holidays"]
    record_messages(rt.engine, "s1", user_turns(*[f"I prefer plain {t}" for t in topics]), user_id="alice")
    dream_pass(rt)
    record_messages(rt.engine, "s2", user_turns(*[f"I prefer fancy {t} now" for t in topics]), user_id="alice")
    run = dream_pass(rt)
    with session_scope(rt.engine) as s:
        holds = s.exec(select(MemoryEvent).where(MemoryEvent.event == "hold").order_by(MemoryEvent.id)).all()
        gone = holds[0].data["by"]
        cabinet.forget(s, gone, reason="wrong")

    accepted = accept_run(rt.engine, run.id)

    assert len(accepted.applied) == 4
    assert [(c.change.memory_id, why) for c, why in accepted.skipped] == [
        (holds[0].memory_id, f"its successor {gone} is no longer current")
    ]
    assert held_runs(rt.engine) == {run.id: 1}
