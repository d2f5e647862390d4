"""A changed fact reaches the judge with the one it replaces (same topic, whatever their
similarity), and a materially different near-duplicate is never merged away: dream passes
over the real store, the real openai client and the scripted server as model and judge."""

from __future__ import annotations

import re

import pytest
from dreamkit import chat_bodies, is_judgement, judge_reply, make_index, make_runtime, transcript_lines
from sqlmodel import select

from dreamer.core.models import Cursor, Memory, MemoryEvent
from dreamer.core.scope import Scope
from dreamer.engine.consolidation.judge import JUDGE_SYSTEM
from dreamer.engine.dream import dream_pass
from dreamer.engine.records import review
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.recall import context, recall
from dreamer.store.db import session_scope

ALICE = Scope("alice")
FACT = re.compile(r"^(?P<said>.+?) \|\|(?P<topic>[\w: ]*)\|\| (?P<text>.+)$")


def facts_script(verdict: str | None = "update"):
    """A model stand-in: each user line ``what was said || topic || fact`` is extracted as a
    profile fact with that topic (none when empty); a judgement files every pair under `verdict`
    (None: a malformed answer)."""

    def script(body: dict) -> Reply:
        if is_judgement(body):
            return Reply.malformed() if verdict is None else judge_reply(body, verdict)
        profile = []
        for seq, role, context_only, text in transcript_lines(body):
            m = FACT.match(text)
            if m and role == "user" and not context_only:
                profile.append(
                    {"text": m["text"], "seqs": [seq], "importance": 0.6, "topic": m["topic"].strip() or None}
                )
        return Reply.json({"profile": profile})

    return script


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        yield srv


def runtime(settings, engine, server, tmp_path, *, llm: bool = True, **update):
    st = settings.model_copy(update={"min_rounds": 1, "ambiguous_low": 0.99, "dup_threshold": 0.99, **update})
    return make_runtime(st, engine, server, make_index("edge", tmp_path), llm=llm)


def say(rt, external_id: str, *lines: str) -> None:
    turns = [m for line in lines for m in ({"role": "user", "content": line}, {"role": "assistant", "content": "ok"})]
    record_messages(rt.engine, external_id, turns, user_id="alice")


def all_memories(rt) -> list[Memory]:
    with session_scope(rt.engine) as s:
        return list(s.exec(select(Memory).order_by(Memory.created_at, Memory.id)).all())


def history(rt, memory_id: str) -> list[tuple[str, str | None, dict]]:
    with session_scope(rt.engine) as s:
        rows = s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == memory_id).order_by(MemoryEvent.id))
        return [(e.event, e.reason, e.data) for e in rows]


def test_a_same_topic_update_with_low_similarity_is_routed_and_supersedes(settings, engine, server, tmp_path):
    server.set_script(facts_script("update"))
    rt = runtime(settings, engine, server, tmp_path)
    try:
        say(rt, "s1", "I live in Boston. || location || The user lives in Boston.")
        dream_pass(rt)
        say(
            rt,
            "s2",
            "Big news: I got a job offer in Denver! || home city || Alice accepted an offer in Denver and moves there next month.",
        )
        run = dream_pass(rt)

        assert (run.added, run.superseded) == (1, 1)
        [judgement] = [b for b in chat_bodies(server) if is_judgement(b)]
        assert judgement["messages"][0]["content"] == JUDGE_SYSTEM
        assert judgement["messages"][1]["content"].startswith(
            "0. (profile, topic home_city, 20"
        )  # the day it was stored, then the text
        old, new = all_memories(rt)
        assert (old.status, old.superseded_by, old.topic, new.topic) == ("superseded", new.id, "home_city", "home_city")
        assert history(rt, new.id)[0][:2] == ("add", "judged update")
        assert history(rt, new.id)[0][2]["routed"] == [old.id]
        assert history(rt, old.id)[-1][:2] == ("supersede", "judged update")
        assert [h.memory_id for h in recall(rt, "where does Alice live", ALICE).hits] == [new.id]
    finally:
        rt.close()


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("Alice's flat is on floor 12.", "Alice's flat is on floor 19."),  # a code would be redacted alike
        ("Alice is allergic to penicillin.", "Alice is not allergic to penicillin."),
    ],
)
def test_a_changed_number_or_a_negation_is_never_merged(settings, engine, server, tmp_path, first, second):
    """Near-duplicates (similarity above `dup_threshold`) that differ materially: without a
    judge both are kept, never merged."""
    server.set_script(facts_script())
    rt = runtime(settings, engine, server, tmp_path, llm=False, dup_threshold=0.0, ambiguous_low=0.0)
    try:
        from dreamer.online.agent_writes import remember

        a = remember(rt, ALICE, first, "profile")
        b = remember(rt, ALICE, second, "profile")
        assert (a.action, b.action) == ("added", "added")
        assert sorted(m.text for m in all_memories(rt) if m.status == "candidate") == sorted([first, second])
    finally:
        rt.close()


def test_a_correction_never_verifies_what_it_corrects(settings, engine, server, tmp_path):
    server.set_script(facts_script("update"))
    rt = runtime(settings, engine, server, tmp_path, dup_threshold=0.0, ambiguous_low=0.0)
    try:
        say(rt, "s1", "I like my coffee with 2 sugars. || || The user takes coffee with 2 sugars.")
        dream_pass(rt)
        say(
            rt,
            "s2",
            "Correction: I like my coffee with 3 sugars now. || || Correction: the user takes coffee with 3 sugars now.",
        )
        run = dream_pass(rt)
        assert (run.merged, run.superseded) == (0, 1)
        old, new = all_memories(rt)
        assert (old.status, len(old.evidence), new.status) == ("superseded", 1, "candidate")
        assert new.text == "Correction: the user takes coffee with 3 sugars now."
    finally:
        rt.close()


def test_a_many_valued_slot_keeps_both(settings, engine, server, tmp_path):
    server.set_script(facts_script("new"))
    rt = runtime(settings, engine, server, tmp_path)
    try:
        say(rt, "s1", "My hobby is chess. || hobby || The user plays chess.")
        dream_pass(rt)
        say(rt, "s2", "My new hobby is pottery. || hobbies || The user took up pottery.")
        run = dream_pass(rt)
        assert (run.added, run.superseded) == (1, 0)
        assert [(m.status, m.topic, m.cardinality) for m in all_memories(rt)] == [("candidate", "hobbies", "many")] * 2
    finally:
        rt.close()


def test_a_failed_judgement_leaves_the_cursor_where_it_was(settings, engine, server, tmp_path):
    server.set_script(facts_script("update"))
    rt = runtime(settings, engine, server, tmp_path)
    try:
        say(rt, "s1", "I work at Initech. || employer || The user works at Initech.")
        dream_pass(rt)
        server.set_script(facts_script(None))
        say(rt, "s2", "I work at Globex now. || employer || The user joined Globex.")
        run = dream_pass(rt)
        assert (run.added, run.failed_sessions) == (0, 1)
        [only] = all_memories(rt)
        assert (only.text, only.status) == ("The user works at Initech.", "candidate")
        with session_scope(rt.engine) as s:
            cursors = {c.session_id: c.processed_seq for c in s.exec(select(Cursor)).all()}
        assert sorted(cursors.values()) == [0, 2]
    finally:
        rt.close()


def test_without_a_model_a_newer_single_valued_value_is_held_beside_the_old(settings, engine, server, tmp_path):
    """The rules extractor (no model) proposes, never applies: the older home city stays current
    (`review_required`, its change held for a person), recall ranks the newer first and labels
    both "may have changed", the context block injects both so labelled, the queue holds the pair."""
    rt = runtime(settings, engine, server, tmp_path, llm=False)
    try:
        say(rt, "s1", "I live in Boston.")
        dream_pass(rt)
        say(rt, "s2", "I live in Denver now.")
        run = dream_pass(rt)
        assert (run.superseded, run.held) == (0, 1)
        old, new = all_memories(rt)
        assert (old.status, old.superseded_by, new.status) == ("review_required", None, "candidate")
        reason = "may have changed: newer value of home_city (no judgement, held for review)"
        assert history(rt, old.id)[-1][:2] == ("hold", reason)
        hits = recall(rt, "Boston Denver", ALICE).hits
        assert [(h.memory_id, h.changed_with) for h in hits] == [(new.id, old.id), (old.id, new.id)]
        assert hits[0].as_json()["may_have_changed"] is True
        block = context(rt, ALICE)
        assert block.memory_ids == [new.id, old.id]
        assert block.text.splitlines()[1:3] == [
            "- The user lives in Denver now. (may have changed)",
            "- The user lives in Boston. (may have changed)",
        ]
        [item] = review.queue(rt.engine, user_id="alice")
        assert (item.memory_id, item.status, item.replaced_by) == (old.id, "review_required", new.id)
    finally:
        rt.close()
