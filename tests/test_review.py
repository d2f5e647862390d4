"""Review mode: what dreaming learns waits as `pending` (not recalled, injected or shown) until a
person accepts, edits or rejects it; a rejected text is not proposed again; the guard's held
supersessions wait in the same queue. Real passes over the scripted server, SQL, Qdrant Edge."""

from __future__ import annotations

import pytest
from dreamkit import judged_runtime, user_turns
from sqlmodel import select

from dreamer.core.errors import NotAllowedNow, NotFound
from dreamer.core.models import Memory
from dreamer.core.scope import Scope
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.engine.markdown import views as markdown
from dreamer.engine.records import review
from dreamer.ingest.store import record_messages
from dreamer.online.recall import context, recall
from dreamer.store.db import session_scope

ALICE = Scope(user_id="alice")


@pytest.fixture
def rt(settings, engine, scripted, tmp_path):
    runtime = judged_runtime(settings, engine, scripted, tmp_path, review_mode=True)
    yield runtime
    runtime.close()


def say(rt, session: str, *lines: str):
    record_messages(rt.engine, session, user_turns(*lines), user_id="alice")
    return dream_pass(rt)


def rows(rt) -> list[tuple[str, str, str]]:
    with session_scope(rt.engine) as s:
        return sorted((m.text, m.status, m.source) for m in s.exec(select(Memory)))


def seen(rt) -> tuple[list[str], list[str], str]:
    """What recall, the context block and the Markdown show of alice's memories."""
    hits = [h.text for h in recall(rt, "breakfast", ALICE).hits]
    block = context(rt, ALICE)
    dreams = (markdown.user_dir(rt.settings.workspace_dir, "alice") / markdown.DREAMS_FILE).read_text()
    return hits, block.memory_ids, dreams


def test_pending_memories_are_hidden_until_accepted(rt):
    say(rt, "s1", "I prefer tea with breakfast.")
    [item] = review.queue(rt.engine)
    assert (item.text, item.status, item.replaces, item.replaced_by) == (
        "The user prefers tea with breakfast.",
        "pending",
        [],
        None,
    )
    hits, injected, dreams = seen(rt)
    assert (hits, injected, "tea" in dreams) == ([], [], False)

    done = review.accept(rt.engine, item.memory_id, user_id="alice")
    outbox.drain(rt, users=["alice"])
    assert (done.status, done.replaced) == ("candidate", [])
    hits, injected, dreams = seen(rt)
    assert (hits, injected, "tea with breakfast" in dreams) == (
        ["The user prefers tea with breakfast."],
        [item.memory_id],
        True,
    )
    assert review.queue(rt.engine) == []
    with pytest.raises(NotAllowedNow, match="is candidate, not waiting for review"):
        review.accept(rt.engine, item.memory_id)
    with pytest.raises(NotFound):
        review.reject(rt.engine, item.memory_id, user_id="bob")


def test_a_rejected_candidate_is_not_proposed_again_and_what_it_replaced_stays(rt):
    say(rt, "s1", "I prefer tea with breakfast.")
    [tea] = review.queue(rt.engine)
    review.accept(rt.engine, tea.memory_id)
    second = say(rt, "s2", "I prefer coffee with breakfast.")
    assert (second.superseded, second.held) == (0, 1)
    queued = {i.status: i for i in review.queue(rt.engine, user_id="alice")}
    coffee, held = queued["pending"], queued["review_required"]
    assert (coffee.replaces, held.memory_id, held.replaced_by) == ([tea.memory_id], tea.memory_id, coffee.memory_id)

    done = review.reject(rt.engine, coffee.memory_id)
    assert (done.status, done.kept) == ("rejected", [tea.memory_id])
    assert rows(rt) == [
        ("The user prefers coffee with breakfast.", "rejected", "dream"),
        ("The user prefers tea with breakfast.", "candidate", "dream"),
    ]
    third = say(rt, "s3", "I prefer coffee with breakfast.")
    assert (third.added, third.rejected) == (0, 1)
    assert review.queue(rt.engine) == []


def test_accepting_in_a_persons_words_replaces_what_was_held(rt):
    say(rt, "s1", "I prefer tea with breakfast.")
    [tea] = review.queue(rt.engine)
    review.accept(rt.engine, tea.memory_id)
    say(rt, "s2", "I prefer coffee with breakfast.")
    coffee = next(i for i in review.queue(rt.engine) if i.status == "pending")
    done = review.accept(rt.engine, coffee.memory_id, text="The user prefers black coffee with breakfast.")
    assert (done.status, done.replaced) == ("verified", [tea.memory_id])
    assert rows(rt) == [
        ("The user prefers black coffee with breakfast.", "verified", "human"),
        ("The user prefers tea with breakfast.", "superseded", "dream"),
    ]
    outbox.drain(rt, users=["alice"])
    hits, injected, _ = seen(rt)
    assert (hits, injected) == (["The user prefers black coffee with breakfast."], [coffee.memory_id])
