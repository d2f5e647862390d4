"""A group of one owner's sessions judged in one call: the real openai client over HTTP to the
scripted server, a real store and the Edge index."""

from __future__ import annotations

from dreamkit import chat_bodies, extraction_bodies, extraction_script, is_judgement, make_index, make_runtime
from sqlmodel import select

from dreamer.core.models import Memory, MemoryEvent
from dreamer.engine.dream import dream_pass
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store.db import session_scope

PAIR_LINE = "-> "


def session_with(*user_lines: str) -> list[dict]:
    texts = [*user_lines, *["ok", "sure", "fine", "thanks"][: max(0, 4 - len(user_lines))]]
    return [{"role": role, "content": t} for line in texts for role, t in (("user", line), ("assistant", "noted"))]


def current(engine) -> list[str]:
    with session_scope(engine) as s:
        rows = s.exec(select(Memory).where(Memory.status.in_(("candidate", "verified")))).all()
        return sorted(m.text for m in rows)


def test_the_ambiguous_pairs_of_a_group_of_sessions_go_in_one_judgement_call(settings, sqlite_engine, tmp_path):
    st = settings.model_copy(update={"ambiguous_low": 0.6, "dup_threshold": 0.99})
    with ScriptedServer(embed_dim=64) as server:
        server.set_script(extraction_script(verdict="update"))
        rt = make_runtime(st, sqlite_engine, server, make_index("edge", tmp_path))
        try:
            said = [
                ("I prefer tea with breakfast.", "I prefer window seats on trains."),
                ("I prefer coffee with breakfast.",),
                ("I prefer aisle seats on trains.",),
            ]
            for i, lines in enumerate(said):
                record_messages(rt.engine, f"s{i}", session_with(*lines), user_id="alice")
            run = dream_pass(rt)
            with session_scope(rt.engine) as s:
                superseding = s.exec(select(MemoryEvent).where(MemoryEvent.event == "supersede")).all()
        finally:
            rt.close()
        judgements = [b for b in chat_bodies(server) if is_judgement(b)]
    assert len(extraction_bodies(server)) == 1
    [judged] = judgements  # the second and the third session's pairs, together
    assert judged["messages"][-1]["content"].count(PAIR_LINE) == 2
    assert (run.status, run.sessions, run.added, run.superseded) == ("ok", 3, 4, 2)
    assert len(superseding) == 2
    assert current(sqlite_engine) == [
        "The user prefers aisle seats on trains.",
        "The user prefers coffee with breakfast.",
    ]
