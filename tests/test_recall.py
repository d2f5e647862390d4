"""Recall and context: hybrid search with the real MiniLM embedder and Qdrant Edge, the fusion
by weight, the text-only fallback, the budgeted context block, status and scope filters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from dreamer.core.models import Memory
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import context_markers
from dreamer.core.tokens import count_tokens
from dreamer.embed.embedders import CachedEmbedder, MiniLMEmbedder, minilm_available
from dreamer.engine import outbox
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import SearchFilter
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.base import ParsedMessage
from dreamer.ingest.store import record_messages
from dreamer.online.ranking import PAYLOAD_FIELDS, Weights, fuse, min_max, narrowed
from dreamer.online.recall import (
    context,
    context_rank_key,
    cut_to_budget,
    recall,
)
from dreamer.store import cabinet
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope

needs_minilm = pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")
ALICE, BOB = Scope("alice"), Scope("bob")
BLOCK_ID = "0123456789abcdef"

FACTS = {
    "deploy": "The deploy failed with error code E4711 on the staging cluster.",
    "linker": "The build broke because of error E4712 in the linker.",
    "hiking": "The user loves hiking in the mountains on weekends.",
    "tea": "The user prefers green tea over coffee.",
    "cat": "The user's cat is called Miso.",
    "nurse": "The user works as a pediatric nurse in Porto.",
}


# --------------------------------------------------------------------------- pure policy


def test_min_max():
    assert min_max({}) == {}
    assert min_max({"a": 3.0}) == {"a": 1.0}
    assert min_max({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}
    assert min_max({"a": 1.0, "b": 3.0, "c": 2.0}) == {"a": 0.0, "b": 1.0, "c": 0.5}


def test_fuse_exact_values():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    text = [("b", 10.0), ("d", 4.0), ("a", 2.0)]
    fused = fuse(dense, text, Weights(dense=0.7, text=0.3))
    assert [i for i, _ in fused] == ["a", "b", "d", "c"]
    assert dict(fused) == pytest.approx({"a": 0.7, "b": 0.7 * 0.5 + 0.3 * 1.0, "d": 0.3 * 0.25, "c": 0.0})


def test_fuse_order_follows_the_weights():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    text = [("b", 10.0), ("d", 4.0), ("a", 2.0)]
    assert [i for i, _ in fuse(dense, text, Weights(dense=0.3, text=0.7))] == ["b", "a", "d", "c"]
    assert [i for i, _ in fuse(dense, text, Weights(dense=1.0, text=0.0))][:3] == ["a", "b", "c"]
    assert fuse([], [("x", 2.0)], Weights(dense=0.7, text=0.3)) == [("x", pytest.approx(0.3))]


def _memory(mid: str, *, status="candidate", sessions=1, importance=0.5, seen_days_ago=0) -> Memory:
    seen = datetime(2024, 6, 1, tzinfo=UTC) - timedelta(days=seen_days_ago)
    evidence = [{"session_id": i + 1, "seqs": [1]} for i in range(sessions)]
    return Memory(
        id=mid,
        user_id="u",
        kind="preference",
        text=mid,
        content_hash=mid,
        status=status,
        evidence=evidence,
        importance=importance,
        last_seen=seen,
    )


def test_context_ranking_verified_then_evidence_then_importance_then_recency():
    ms = [
        _memory("old-candidate", seen_days_ago=9),
        _memory("new-candidate", seen_days_ago=1),
        _memory("important", importance=0.9, seen_days_ago=9),
        _memory("two-sessions", sessions=2, importance=0.1, seen_days_ago=9),
        _memory("verified", status="verified", importance=0.1, seen_days_ago=30),
    ]
    ranked = [m.id for m in sorted(ms, key=context_rank_key)]
    assert ranked == ["verified", "two-sessions", "important", "new-candidate", "old-candidate"]


def test_cut_to_budget_keeps_the_longest_fitting_prefix():
    lines = ["- one two three", "- four", "- five six seven eight"]
    costs = [count_tokens(ln) + 1 for ln in lines]
    assert cut_to_budget(lines, costs[0] + costs[1]) == lines[:2]
    assert cut_to_budget(lines, costs[0] + costs[1] - 1) == lines[:1]
    assert cut_to_budget(lines, 100, overhead=100) == []


# --------------------------------------------------------------------------- with the real parts


@pytest.fixture(scope="module")
def minilm():
    if not minilm_available():
        pytest.skip("the `local` extra is not installed")
    return CachedEmbedder(MiniLMEmbedder())


def runtime(settings, engine, tmp_path, embedder) -> Runtime:
    index = EdgeIndex(tmp_path / "edge", 384)
    return Runtime.open(settings, engine=engine, llm=None, embedder=embedder, index=index, busy=AlwaysIdle())


def store(rt, user_id: str, text: str, **fields) -> str:
    kind = fields.pop("kind", "preference")
    evidence = fields.pop("evidence", [{"session_id": 1, "seqs": [1]}])
    with session_scope(rt.engine) as s:
        m = cabinet.add_memory(s, user_id=user_id, kind=kind, text=text, source="dream", evidence=evidence)
        for key, value in fields.items():
            setattr(m, key, value)
        s.add(m)
    return m.id


@pytest.fixture
def hybrid(settings, sqlite_engine, tmp_path, minilm):
    rt = runtime(settings, sqlite_engine, tmp_path, minilm)
    ids = {name: store(rt, "alice", text) for name, text in FACTS.items()}
    ids["bob"] = store(rt, "bob", "Bob's deploy failed with error code E4711 too.")
    outbox.drain(rt)
    yield rt, ids
    rt.close()


@needs_minilm
def test_a_rare_exact_token_is_answered_by_bm25(hybrid):
    rt, ids = hybrid
    text_side = rt.index.search_text("E4711", ALICE, 20)
    assert [h.memory_id for h in text_side] == [ids["deploy"]]
    dense_st = rt.settings.model_copy(update={"dense_weight": 1.0, "text_weight": 0.0})
    dense_rt = Runtime.open(
        dense_st, engine=rt.engine, llm=None, embedder=rt.embedder, index=rt.index, busy=AlwaysIdle()
    )
    dense_only = recall(dense_rt, "E4711", ALICE)
    assert dense_only.hits[0].memory_id == ids["linker"]  # the dense side alone picks the wrong error

    found = recall(rt, "E4711", ALICE)

    assert found.mode == "hybrid"
    assert found.hits[0].memory_id == ids["deploy"]
    assert found.hits[0].rank == 1


@needs_minilm
def test_a_paraphrase_is_answered_by_the_dense_side(hybrid):
    rt, ids = hybrid
    query = "outdoor trekking trips in the hills"
    assert rt.index.search_text(query, ALICE, 20) == []

    found = recall(rt, query, ALICE)

    assert found.hits[0].memory_id == ids["hiking"]
    assert found.hits[0].text == FACTS["hiking"]


@needs_minilm
def test_recall_scores_are_the_fused_index_scores(hybrid):
    rt, ids = hybrid
    limit = rt.settings.candidate_multiplier * rt.settings.recall_k
    vector = rt.embedder.embed(["E4711"])[0]
    dense = [(h.memory_id, h.score) for h in rt.index.search_dense(vector, ALICE, limit)]
    text = [(h.memory_id, h.score) for h in rt.index.search_text("E4711", ALICE, limit)]
    expected = fuse(dense, text, Weights(dense=rt.settings.dense_weight, text=rt.settings.text_weight))[:5]

    found = recall(rt, "E4711", ALICE)

    assert [(h.memory_id, h.score) for h in found.hits] == [(i, pytest.approx(s)) for i, s in expected]
    assert [h.rank for h in found.hits] == [1, 2, 3, 4, 5]
    assert found.hits[0].evidence == [{"session_id": 1, "seqs": [1]}]


@needs_minilm
def test_rank_asks_the_index_for_just_the_payload_fields_ranking_reads(hybrid):
    rt, _ = hybrid
    flt = narrowed(SearchFilter())
    vector = rt.embedder.embed(["E4711 deploy failed"])[0]
    hits = rt.index.search_dense(vector, ALICE, 10, flt) + rt.index.search_text("E4711 deploy failed", ALICE, 10, flt)

    assert flt.payload_fields == PAYLOAD_FIELDS == ("speakers", "evidence_at", "said_on")
    assert len(hits) >= 5 and all(set(h.payload) <= {"memory_id", *PAYLOAD_FIELDS} for h in hits)
    assert all(h.payload["memory_id"] == h.memory_id for h in hits)


@needs_minilm
def test_recall_stays_in_scope(hybrid):
    rt, ids = hybrid
    alice = recall(rt, "E4711 deploy failed", ALICE, k=20)
    bob = recall(rt, "E4711 deploy failed", BOB, k=20)
    assert ids["bob"] not in {h.memory_id for h in alice.hits}
    assert [h.memory_id for h in bob.hits] == [ids["bob"]]
    assert ids["bob"] not in context(rt, ALICE).memory_ids


@needs_minilm
def test_current_memories_only_unless_include_all(hybrid):
    rt, ids = hybrid
    with session_scope(rt.engine) as s:
        cabinet.forget(s, ids["cat"], reason="test")
    outbox.drain(rt)

    assert ids["cat"] not in {h.memory_id for h in recall(rt, "cat called Miso", ALICE, k=10).hits}
    everything = recall(rt, "cat called Miso", ALICE, k=10, include_all=True)
    assert everything.hits[0].memory_id == ids["cat"]
    assert everything.hits[0].status == "forgotten"


@needs_minilm
def test_kinds_and_time_filters(hybrid):
    rt, ids = hybrid
    with session_scope(rt.engine) as s:
        m = s.get(Memory, ids["nurse"])
        m.kind, m.indexed_at = "profile", None
        s.add(m)
    outbox.drain(rt)
    assert [h.memory_id for h in recall(rt, "job", ALICE, kinds=["profile"]).hits] == [ids["nurse"]]
    future = datetime.now(UTC) + timedelta(days=1)
    assert recall(rt, "tea", ALICE, since=future).hits == []
    assert recall(rt, "tea", ALICE, until=future.replace(tzinfo=None)).hits != []


def test_text_only_fallback_says_so(settings, sqlite_engine, tmp_path):
    rt = runtime(settings, sqlite_engine, tmp_path, None)
    try:
        ids = {name: store(rt, "alice", text) for name, text in FACTS.items()}
        outbox.drain(rt)
        found = recall(rt, "E4711", ALICE)
        assert (found.mode, found.note) == ("text-only", "no embedder available: full-text search only")
        assert [h.memory_id for h in found.hits] == [ids["deploy"]]
        assert found.as_json()["mode"] == "text-only"
    finally:
        rt.close()


# --------------------------------------------------------------------------- context


def test_context_is_ranked_and_cut_to_the_budget(settings, sqlite_engine, tmp_path):
    rt = runtime(settings, sqlite_engine, tmp_path, None)
    try:
        now = datetime.now(UTC)
        sessions = lambda n: [{"session_id": i + 1, "seqs": [1]} for i in range(n)]  # noqa: E731
        ids = {  # evidence from two sessions makes a memory verified
            "most_evidence": store(
                rt, "alice", "The user is vegetarian.", kind="profile", evidence=sessions(3), importance=0.1
            ),
            "verified": store(rt, "alice", "The user prefers quiet hotels.", evidence=sessions(2), importance=0.2),
            "important": store(rt, "alice", "The user prefers trains.", importance=0.9),
            "recent": store(rt, "alice", "The user prefers tea.", last_seen=now),
            "older": store(rt, "alice", "The user prefers jazz.", last_seen=now - timedelta(days=3)),
        }
        store(rt, "alice", "The user is learning Portuguese.", kind="focus")  # not a context kind
        store(rt, "alice", "The user likes opera.", status="review_required")
        store(rt, "alice", "The user liked rock.", status="superseded")
        store(rt, "bob", "Bob is vegan.", kind="profile", status="verified")

        opening, closing = context_markers(BLOCK_ID)
        full = context(rt, ALICE, block_id=BLOCK_ID)
        assert full.memory_ids == [ids[k] for k in ("most_evidence", "verified", "important", "recent", "older")]
        assert full.text.splitlines()[0] == opening and full.text.splitlines()[-1] == closing
        assert full.tokens == count_tokens(full.text)

        overhead = count_tokens(opening) + count_tokens(closing) + 2
        costs = [count_tokens(ln) + 1 for ln in full.text.splitlines()[1:-1]]
        budget = overhead + costs[0] + costs[1]
        small = context(rt, ALICE, budget_tokens=budget, block_id=BLOCK_ID)
        assert small.memory_ids == [ids["most_evidence"], ids["verified"]]
        assert small.tokens <= budget
        assert context(rt, ALICE, budget_tokens=budget - 1, block_id=BLOCK_ID).memory_ids == [ids["most_evidence"]]
        assert context(rt, ALICE, budget_tokens=0).as_json() == {"text": "", "memory_ids": [], "tokens": 0}
    finally:
        rt.close()


def on_and_off(settings, engine, tmp_path, embedder, signal: str) -> tuple[Runtime, Runtime]:
    """Two runtimes over one documented Edge index: `settings` as given, and with `signal` at 0."""
    index = DocumentedIndex(EdgeIndex(tmp_path / "edge", 384), engine)
    return tuple(
        Runtime.open(st, engine=engine, llm=None, embedder=embedder, index=index, busy=AlwaysIdle())
        for st in (settings, settings.model_copy(update={signal: 0.0}))
    )


@needs_minilm
def test_a_date_in_the_query_lifts_what_was_said_then(settings, sqlite_engine, tmp_path, minilm):
    said = {"may": datetime(2023, 5, 8, 10, tzinfo=UTC), "july": datetime(2023, 7, 20, 10, tzinfo=UTC)}
    texts = {"may": "The user went swimming in the lake.", "july": "The user went kayaking on the lake."}
    rt, undated = on_and_off(settings, sqlite_engine, tmp_path, minilm, "date_weight")
    queries = {"may": "What did the user do at the lake in May 2023?", "july": "What did the user do on 22 July, 2023?"}
    try:
        ids = {name: store(rt, "alice", text, evidence=[]) for name, text in FACTS.items()}
        for name, when in said.items():
            turn = ParsedMessage(role="user", content=f"We were at the lake ({name}).", created_at=when)
            sid = record_messages(sqlite_engine, name, [turn], user_id="alice").session_id
            ids[name] = store(rt, "alice", texts[name], evidence=[{"session_id": sid, "seqs": [1]}])
        outbox.drain(rt)
        dated = {name: recall(rt, q, ALICE, k=10).hits for name, q in queries.items()}
        plain = {
            name: {h.memory_id: h.score for h in recall(undated, q, ALICE, k=10).hits} for name, q in queries.items()
        }
    finally:
        rt.close()
    for name, other in (("may", "july"), ("july", "may")):
        scores = {h.memory_id: h.score for h in dated[name]}
        assert dated[name][0].memory_id == ids[name]
        assert scores[ids[name]] == pytest.approx(plain[name][ids[name]] + settings.date_weight)
        assert scores[ids[other]] == pytest.approx(plain[name][ids[other]])  # said on another day


@needs_minilm
def test_a_memory_is_found_by_the_message_it_rests_on(settings, sqlite_engine, tmp_path, minilm):
    index = DocumentedIndex(EdgeIndex(tmp_path / "edge", 384), sqlite_engine, embedder=minilm)
    rt, plain = (
        Runtime.open(st, engine=sqlite_engine, llm=None, embedder=minilm, index=index, busy=AlwaysIdle())
        for st in (settings, settings.model_copy(update={"said_match": False}))
    )
    query = "How did the user celebrate winning the chess tournament?"
    said = {name: f"Well, {text[0].lower()}{text[1:]}" for name, text in FACTS.items()}  # each rests on its own turn
    said["chess"], kept = (
        "I joined a chess club that meets on Thursdays.",
        "The user plays chess in a club on Thursdays.",
    )
    said["dinner"] = "We celebrated my chess tournament win with a big dinner at the harbour!"
    texts = {**FACTS, "chess": kept, "dinner": "The user likes seafood restaurants."}
    try:
        sessions = {
            name: record_messages(
                sqlite_engine, name, [ParsedMessage(role="user", content=text)], user_id="alice"
            ).session_id
            for name, text in said.items()
        }
        ids = {
            name: store(rt, "alice", texts[name], evidence=[{"session_id": sid, "seqs": [1]}])
            for name, sid in sessions.items()
        }
        outbox.drain(rt)
        found = [h.memory_id for h in recall(rt, query, ALICE, k=3).hits]
        before = [h.memory_id for h in recall(plain, query, ALICE, k=3).hits]
    finally:
        rt.close()
    names = {v: k for k, v in ids.items()}
    assert [names[i] for i in found][:1] == ["dinner"], [
        names[i] for i in found
    ]  # its sentence is about restaurants; its turn answers
    assert before[0] == ids["chess"] and ids["dinner"] not in before[:1]


@needs_minilm
def test_what_rests_near_the_best_candidate_is_lifted(settings, sqlite_engine, tmp_path, minilm):
    turns = [ParsedMessage(role="user" if n % 2 else "assistant", content=f"turn {n}") for n in range(1, 11)]
    one = settings.model_copy(update={"passage_top": 1})
    rt, flat = on_and_off(one, sqlite_engine, tmp_path, minilm, "passage_weight")
    query = "What error did the staging deploy fail with?"
    try:
        ids = {name: store(rt, "alice", text, evidence=[]) for name, text in FACTS.items() if name != "deploy"}
        sid = record_messages(sqlite_engine, "ops", turns, user_id="alice").session_id
        for name, seq, text in (
            ("deploy", 1, FACTS["deploy"]),
            ("near", 3, "The user rolled back to release 41."),
            ("far", 9, "The user wants a quieter pager rota."),
        ):
            ids[name] = store(rt, "alice", text, evidence=[{"session_id": sid, "seqs": [seq]}])
        outbox.drain(rt)
        lifted = {h.memory_id: h.score for h in recall(rt, query, ALICE, k=10).hits}
        plain = {h.memory_id: h.score for h in recall(flat, query, ALICE, k=10).hits}
    finally:
        rt.close()
    assert max(plain, key=plain.get) == ids["deploy"]  # the best candidate sets the passage
    assert lifted[ids["near"]] == pytest.approx(plain[ids["near"]] + one.passage_weight)  # 2 messages away
    assert lifted[ids["far"]] == pytest.approx(plain[ids["far"]])  # 8 away
    assert lifted[ids["deploy"]] == pytest.approx(plain[ids["deploy"]])
