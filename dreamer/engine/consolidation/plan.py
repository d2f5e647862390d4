"""Consolidation planning: each candidate decided against its nearest current neighbours in its
owner's scope (and the candidates before it), the ambiguous pairs judged in one batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from dreamer.core.consolidate import (
    Decision,
    Neighbour,
    Thresholds,
    content_hash,
    decide,
    in_said_order,
    resolve,
    token_similarity,
)
from dreamer.core.implied import implied_query, implied_reason, implied_slots, pair_grounds
from dreamer.core.models import Session
from dreamer.core.scope import Scope
from dreamer.core.topics import Topic, infer_topic, topic_of
from dreamer.engine.consolidation.judge import Judge, JudgePair, Statement
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.load import Work
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import SearchFilter
from dreamer.store import cabinet
from dreamer.store.db import session_scope

NEIGHBOUR_FIELDS = ("text", "kind", "status", "content_hash", "topic", "valid_from")  # what a neighbour search reads

Vector = list[float]


@dataclass
class Planned:
    """A candidate and what consolidation decided for it."""

    candidate: Candidate
    decision: Decision
    memory_id: str | None = None  # the memory this candidate added or merged into, once applied
    topic: Topic | None = None  # the slot it fills, as stated or inferred from its phrasing
    said: date | None = None  # the day it was stated, when known
    seen: dict[str, Neighbour] = field(default_factory=dict)  # the neighbours it was decided against
    origin: int | None = None  # which session of the batch it was extracted from


def owner_scope(sess: Session) -> Scope:
    """The session's owner: what is learned from it belongs to exactly this scope."""
    return Scope(user_id=sess.user_id, agent_id=sess.agent_id, project=sess.project, team=sess.team)


def plan_session(rt: Runtime, work: Work, candidates: list[Candidate], judge: Judge | None) -> list[Planned]:
    """A session's candidates planned against memories owned by exactly its scope."""
    sess = work.session
    days = _days(work)
    said = [_said(c, days) for c in candidates]
    origins = [0] * len(candidates)
    return plan_candidates(
        rt, owner_scope(sess), sess.user_id, candidates, judge, exact=True, said=said, origins=origins
    )


def plan_candidates(
    rt: Runtime,
    scope: Scope,
    user_id: str,
    candidates: list[Candidate],
    judge: Judge | None,
    *,
    exact: bool = False,
    said: Sequence[date | None] | None = None,
    origins: Sequence[int] | None = None,
) -> list[Planned]:
    """Decide each candidate against its current neighbours in `scope`: its nearest ones and
    every one filling the same slot (the routed pairs judged in one batch). `said`: the day
    each candidate was stated, shown to the judge; `origins`: the session of the batch each was
    extracted from (candidates of one session are `beside` each other).

    With `exact`, a neighbour must be owned by exactly `scope` (None there means no agent,
    project or team, not any): a session never merges into or supersedes another scope's memory.
    """
    if not candidates:
        return []
    st = rt.settings
    texts = [c.text for c in candidates]
    vectors: Sequence[Vector | None] = rt.embedder.embed(texts) if rt.embedder is not None else [None] * len(candidates)
    hashes = [content_hash(c.text) for c in candidates]
    topics = [candidate_topic(c) for c in candidates]
    owner = scope if exact else None
    with session_scope(rt.engine) as s:
        known = cabinet.known_hashes(s, user_id, hashes, owner=owner)
        keys = {key for cand, topic in zip(candidates, topics) for key in _reached(cand.text, topic)}
        slots = cabinet.current_by_topic(s, user_id, keys, owner=owner)
    thresholds = Thresholds(st.dup_threshold, st.ambiguous_low, st.route_max_pairs, st.change_low, st.route_margin)
    sims = _similarities(vectors)
    planned: list[Planned] = []
    found = map(_union, find_neighbours(rt, scope, texts, vectors, exact=exact), implied(rt, scope, texts, exact))
    days = list(said) if said is not None else [None] * len(candidates)
    sources: list[int | None] = list(origins) if origins is not None else [None] * len(candidates)
    for cand, digest, stored, topic, day, origin in zip(candidates, hashes, found, topics, days, sources):
        same_slot = [_known(m, 0.0) for key in _reached(cand.text, topic) for m in slots.get(key, [])]
        same_text = [_known(known.current[digest], 1.0)] if digest in known.current else []
        neighbours = _union(stored, same_slot) + _pending(planned, cand, origin, sims, hashes) + same_text
        d = _decide(cand, neighbours, thresholds, topic, known.forgotten, judge is not None, user_id)
        seen = {n.memory_id: n for n in neighbours}
        planned.append(Planned(cand, d, topic=topic, said=day, seen=seen, origin=origin))
    _judge(judge, planned, user_id)
    _keep_said_order(planned)
    return planned


def _decide(
    cand: Candidate,
    neighbours: list[Neighbour],
    thresholds: Thresholds,
    topic: Topic | None,
    forgotten: frozenset[str],
    can_judge: bool,
    user_id: str,
) -> Decision:
    """`decide` for one candidate; the user's id stands for the name they go by ("Alice moved
    ..." is Alice's own change when she is `alice`)."""
    return decide(
        cand.text,
        cand.kind,
        neighbours,
        thresholds,
        topic=topic,
        forgotten_hashes=forgotten,
        can_judge=can_judge,
        user_name=user_id,
    )


def _reached(text: str, topic: Topic | None) -> list[str]:
    """The slots a candidate is judged against: its own, and those it reaches unnamed."""
    return ([topic.key] if topic else []) + sorted(implied_slots(text) - ({topic.key} if topic else set()))


def _keep_said_order(planned: list[Planned]) -> None:
    """Judged or not, what was said earlier never retires what was said since."""
    for p in planned:
        targets = [p.seen.get(t) for t in (p.decision.target or "", *p.decision.also)]
        p.decision = in_said_order(p.decision, p.said, [t.said for t in targets if t is not None])


def candidate_topic(cand: Candidate) -> Topic | None:
    """The slot a candidate fills: as the extractor stated it, else as its phrasing makes clear."""
    return topic_of(cand.topic, cand.cardinality) or infer_topic(cand.text, cand.kind)


def _said(cand: Candidate, days: dict[int, date]) -> date | None:
    """The day a candidate was stated: the latest of the lines it rests on."""
    return max((days[q] for q in cand.seqs if q in days), default=None)


def _days(work: Work) -> dict[int, date]:
    """The day each line of the session was said on (a line without one: the day of the line before)."""
    out: dict[int, date] = {}
    day = None
    for line in work.lines:
        day = line.day or day
        if day is not None:
            out[line.seq] = day
    return out


def _known(m: cabinet.KnownMemory, similarity: float) -> Neighbour:
    return Neighbour(m.id, m.text, m.kind, m.content_hash, similarity, m.status, m.topic, m.valid_from)


def _union(nearest: list[Neighbour], same_slot: list[Neighbour]) -> list[Neighbour]:
    """The nearest neighbours, then the slot's memories the search did not find; a memory found
    both ways keeps its similarity and takes its topic from SQL (the truth)."""
    topic_of_slot = {n.memory_id: n.topic for n in same_slot}
    merged = [replace(n, topic=topic_of_slot.get(n.memory_id, n.topic)) for n in nearest]
    seen = {n.memory_id for n in merged}
    return merged + [n for n in same_slot if n.memory_id not in seen]


def find_neighbours(
    rt: Runtime, scope: Scope, texts: list[str], vectors: Sequence[Vector | None], *, exact: bool = False
) -> list[list[Neighbour]]:
    """Each text's nearest current memories in scope: dense when every text has a vector (one
    batched search), else BM25 + word overlap.

    With `exact`, only memories owned by exactly `scope` (see `SearchFilter.exact_scope`)."""
    k = rt.settings.neighbours
    flt = SearchFilter(payload_fields=NEIGHBOUR_FIELDS, exact_scope=exact)
    dense = [v for v in vectors if v is not None]
    if vectors and len(dense) == len(vectors):
        found = rt.index.search_dense_many(dense, scope, k, flt)
        return [[_neighbour(h.payload, h.memory_id, float(h.score)) for h in hits] for hits in found]
    return [
        [
            _neighbour(h.payload, h.memory_id, token_similarity(text, h.payload.get("text", "")))
            for h in rt.index.search_text(text, scope, k, flt)
        ]
        for text in texts
    ]


def implied(rt: Runtime, scope: Scope, texts: list[str], exact: bool) -> list[list[Neighbour]]:
    """Each text's memories found by the words of what it may change without saying them
    (`implied_query`: what ended, the other values of its kind), kept when `implied_reason`
    holds; their similarity is 0: found by their words, not by nearness."""
    k = rt.settings.neighbours
    flt = SearchFilter(payload_fields=NEIGHBOUR_FIELDS, exact_scope=exact)
    out: list[list[Neighbour]] = []
    for text in texts:
        query = implied_query(text)
        hits = rt.index.search_text(query, scope, k, flt) if query else []
        found = [_neighbour(h.payload, h.memory_id, 0.0) for h in hits]
        out.append([n for n in found if implied_reason(text, n.text, n.topic)])
    return out


def _neighbour(payload: dict[str, Any], memory_id: str, similarity: float) -> Neighbour:
    text = payload.get("text", "")
    digest = payload.get("content_hash") or content_hash(text)  # points indexed before it was in the payload
    stamp = payload.get("valid_from")
    said = datetime.fromtimestamp(stamp, UTC) if isinstance(stamp, (int, float)) else None
    kind, status = payload.get("kind", ""), payload.get("status", "")
    return Neighbour(memory_id, text, kind, digest, similarity, status, payload.get("topic"), said)


def _similarities(vectors: Sequence[Vector | None]) -> np.ndarray | None:
    """Cosine similarity of every pair of candidates (the vectors are unit length), or None."""
    if not vectors or any(v is None for v in vectors):
        return None
    matrix = np.asarray(vectors, dtype=np.float64)
    return matrix @ matrix.T


def _pending(
    planned: list[Planned], cand: Candidate, origin: int | None, sims: np.ndarray | None, hashes: list[str]
) -> list[Neighbour]:
    """Candidates added earlier in this batch count as neighbours too; those extracted from the
    same session as this one are `beside` it."""
    out = []
    i = len(planned)
    for j, p in enumerate(planned):
        if p.decision.action not in ("add", "judge", "supersede"):
            continue
        sim = float(sims[i, j]) if sims is not None else token_similarity(cand.text, p.candidate.text)
        topic = p.topic.key if p.topic else None
        out.append(
            Neighbour(
                f"pending:{j}",
                p.candidate.text,
                p.candidate.kind,
                hashes[j],
                sim,
                topic=topic,
                said=p.said,
                beside=origin is not None and p.origin == origin,
            )
        )
    return out


def _judge(judge: Judge | None, planned: list[Planned], user_name: str | None = None) -> None:
    """One batched judgement for every routed pair of the batch; without a judge, each routed
    candidate takes its unjudged fallback."""
    pending = [p for p in planned if p.decision.action == "judge"]
    if not pending:
        return
    if judge is None:
        for p in pending:
            p.decision = resolve(p.decision, [None] * len(p.decision.routed))
        return
    pairs = []
    for p in pending:
        new = Statement("new", p.candidate.text, p.candidate.kind, p.topic.key if p.topic else None, p.said)
        for target in p.decision.routed:
            old = p.seen[target]
            grounds = pair_grounds(new.text, old.topic, user_name)
            pairs.append(JudgePair(Statement(target, old.text, old.kind, old.topic, old.said), new, grounds))
    verdicts = iter(judge.judge(pairs).verdicts)
    for p in pending:
        p.decision = resolve(p.decision, [next(verdicts, None) for _ in p.decision.routed])


# --------------------------------------------------------------------------- a group planned as one


def plan_group(rt: Runtime, works: list[Work], candidates: list[list[Candidate]], judge: Judge | None) -> list[Planned]:
    """Consecutive sessions of one owner planned as one batch: each candidate against the stored
    memories and the candidates of the sessions before it, the routed pairs of all of them
    judged in one call. A decision about an earlier candidate names it ``pending:<n>``, its place
    in the batch; `session_plan` takes one session's part once the sessions before it are applied."""
    sess = works[0].session
    flat = [c for found in candidates for c in found]
    said = [_said(c, _days(w)) for w, found in zip(works, candidates) for c in found]
    origins = [i for i, found in enumerate(candidates) for _ in found]
    return plan_candidates(rt, owner_scope(sess), sess.user_id, flat, judge, exact=True, said=said, origins=origins)


def session_plan(batch: list[Planned], start: int, end: int) -> list[Planned]:
    """The plans `start`..`end` of a group's batch as one session's plan, made in place: a pending
    id within them renumbered from `start`, one before them the memory it became when applied (a
    target that was rejected or dropped: the candidate is added instead). Applying it sets the
    batch's `memory_id`s that the later sessions' plans refer to."""
    part = batch[start:end]
    for p in part:
        d = p.decision

        def local(ref: str | None) -> str | None:
            if ref is None or not ref.startswith("pending:"):
                return ref
            j = int(ref.split(":")[1])
            return f"pending:{j - start}" if j >= start else batch[j].memory_id

        target = local(d.target)
        also = tuple(t for t in map(local, d.also) if t)
        routed = tuple(t for t in map(local, d.routed) if t)
        if d.target is not None and target is None:
            d = replace(d, action="add", reason=f"{d.reason}; what it matched was not applied")
        p.decision = replace(d, target=target, also=also, routed=routed)
    return part
