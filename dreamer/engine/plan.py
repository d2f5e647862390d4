"""Consolidation planning: each candidate decided against its nearest current neighbours in its
owner's scope (and the candidates before it), the ambiguous pairs judged in one batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlmodel import col, select

from dreamer.core.consolidate import (
    JUDGE_SYSTEM,
    Decision,
    Judgements,
    JudgeRequest,
    Neighbour,
    Thresholds,
    content_hash,
    decide,
    resolve,
    token_similarity,
    verdicts_by_pair,
)
from dreamer.core.models import Memory, Session
from dreamer.core.scope import Scope
from dreamer.engine.extract import Candidate
from dreamer.engine.load import Work
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import SearchFilter
from dreamer.llm.client import LLM
from dreamer.store import cabinet
from dreamer.store.db import session_scope

NEIGHBOUR_FIELDS = ("text", "kind", "status", "content_hash")  # what a neighbour search reads

Vector = list[float]


@dataclass
class Planned:
    """A candidate and what consolidation decided for it."""

    candidate: Candidate
    decision: Decision
    memory_id: str | None = None  # the memory this candidate added or merged into, once applied


def owner_scope(sess: Session) -> Scope:
    """The session's owner: what is learned from it belongs to exactly this scope."""
    return Scope(user_id=sess.user_id, agent_id=sess.agent_id, project=sess.project, team=sess.team)


def plan_session(rt: Runtime, work: Work, candidates: list[Candidate], llm: LLM | None) -> list[Planned]:
    """A session's candidates planned against memories owned by exactly its scope."""
    sess = work.session
    return plan_candidates(rt, owner_scope(sess), sess.user_id, candidates, llm, exact=True)


def plan_candidates(
    rt: Runtime,
    scope: Scope,
    user_id: str,
    candidates: list[Candidate],
    llm: LLM | None,
    *,
    exact: bool = False,
) -> list[Planned]:
    """Decide each candidate against its nearest current neighbours in `scope` (judged in one batch).

    With `exact`, a neighbour must be owned by exactly `scope` (None there means no agent,
    project or team, not any): a session never merges into or supersedes another scope's memory.
    """
    if not candidates:
        return []
    st = rt.settings
    embedder = rt.embedder
    vectors: Sequence[Vector | None] = (
        embedder.embed([c.text for c in candidates]) if embedder is not None else [None] * len(candidates)
    )
    hashes = [content_hash(c.text) for c in candidates]
    with session_scope(rt.engine) as s:
        known = cabinet.known_hashes(s, user_id, hashes, owner=scope if exact else None)
    thresholds = Thresholds(dup=st.dup_threshold, ambiguous_low=st.ambiguous_low)
    sims = _similarities(vectors)
    planned: list[Planned] = []
    found = find_neighbours(rt, scope, [c.text for c in candidates], vectors, exact=exact)
    for cand, digest, stored in zip(candidates, hashes, found):
        neighbours = stored + _pending(planned, cand, sims, hashes)
        if digest in known.current:
            m = known.current[digest]
            neighbours.append(Neighbour(m.id, m.text, m.kind, m.content_hash, 1.0, m.status))
        d = decide(
            cand.text, cand.kind, neighbours, thresholds, forgotten_hashes=known.forgotten, can_judge=llm is not None
        )
        planned.append(Planned(cand, d))
    _judge(llm, planned, _texts(rt, planned))
    return planned


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


def _neighbour(payload: dict[str, Any], memory_id: str, similarity: float) -> Neighbour:
    text = payload.get("text", "")
    digest = payload.get("content_hash") or content_hash(text)  # points indexed before it was in the payload
    return Neighbour(memory_id, text, payload.get("kind", ""), digest, similarity, payload.get("status", ""))


def _similarities(vectors: Sequence[Vector | None]) -> np.ndarray | None:
    """Cosine similarity of every pair of candidates (the vectors are unit length), or None."""
    if not vectors or any(v is None for v in vectors):
        return None
    matrix = np.asarray(vectors, dtype=np.float64)
    return matrix @ matrix.T


def _pending(planned: list[Planned], cand: Candidate, sims: np.ndarray | None, hashes: list[str]) -> list[Neighbour]:
    """Candidates added earlier in this session count as neighbours too."""
    out = []
    i = len(planned)
    for j, p in enumerate(planned):
        if p.decision.action not in ("add", "judge", "supersede"):
            continue
        sim = float(sims[i, j]) if sims is not None else token_similarity(cand.text, p.candidate.text)
        out.append(Neighbour(f"pending:{j}", p.candidate.text, p.candidate.kind, hashes[j], sim))
    return out


def _texts(rt: Runtime, planned: list[Planned]) -> dict[str, str]:
    ids = [p.decision.target for p in planned if p.decision.action == "judge" and p.decision.target]
    ids = [i for i in ids if not i.startswith("pending:")]
    if not ids:
        return {}
    with session_scope(rt.engine) as s:
        return {m.id: m.text for m in s.exec(select(Memory).where(col(Memory.id).in_(ids))).all()}


def _judge(llm: LLM | None, planned: list[Planned], texts: dict[str, str]) -> None:
    """One batched judgement for the session's ambiguous pairs."""
    pending = [p for p in planned if p.decision.action == "judge"]
    if not pending:
        return
    if llm is None:
        for p in pending:
            p.decision = resolve(p.decision, None)
        return
    req = JudgeRequest()
    for p in pending:
        target = p.decision.target or ""
        old = (
            planned[int(target.split(":")[1])].candidate.text
            if target.startswith("pending:")
            else texts.get(target, "")
        )
        req.pairs.append((old, p.candidate.text))
    result, _ = llm.complete_json(system=JUDGE_SYSTEM, user=req.prompt(), schema=Judgements, name="judgements")
    for p, verdict in zip(pending, verdicts_by_pair(result, len(pending))):
        p.decision = resolve(p.decision, verdict)


# --------------------------------------------------------------------------- a group planned as one


def plan_group(rt: Runtime, works: list[Work], candidates: list[list[Candidate]], llm: LLM | None) -> list[Planned]:
    """Consecutive sessions of one owner planned as one batch: each candidate against the stored
    memories and the candidates of the sessions before it, the ambiguous pairs of all of them
    judged in one call. A decision about an earlier candidate names it ``pending:<n>``, its place
    in the batch; `session_plan` takes one session's part once the sessions before it are applied."""
    sess = works[0].session
    flat = [c for found in candidates for c in found]
    return plan_candidates(rt, owner_scope(sess), sess.user_id, flat, llm, exact=True)


def session_plan(batch: list[Planned], start: int, end: int) -> list[Planned]:
    """The plans `start`..`end` of a group's batch as one session's plan, made in place: a pending
    target within them renumbered from `start`, one before them the memory it became when applied
    (a rejected or dropped one: the candidate is added instead). Applying it sets the batch's
    `memory_id`s that the later sessions' plans refer to."""
    part = batch[start:end]
    for p in part:
        target = p.decision.target
        if target is None or not target.startswith("pending:"):
            continue
        j = int(target.split(":")[1])
        target = f"pending:{j - start}" if j >= start else batch[j].memory_id
        p.decision = (
            replace(p.decision, target=target)
            if target is not None
            else Decision("add", reason=f"{p.decision.reason}; what it matched was not applied")
        )
    return part
