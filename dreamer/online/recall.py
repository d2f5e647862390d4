"""Recall: hybrid search (dense + Qdrant BM25, fused by weight) over one scope, and the
budgeted context block of preferences and profile facts to inject.

The context block is data, not markup: each memory is one line rendered by
`memory_text.as_data` (normalised, redacted, markup defused), between markers whose id is drawn
for this render (`redact.context_markers`), so no stored text can close the block or forge one;
the dreamer strips a block by that id when it comes back in a transcript.

A fact whose time is over (its `valid_until`, `dreamer.core.expiry`: "the interview is next
Tuesday" after that Tuesday) is past: recall and the context block label it so, with the day it
ended, and rank it below every current fact; before that day it is served as any other.

A change nobody judged (`dreamer.store.held`: a newer value of a slot said without a judge, or a
supersession the guard held) retires nothing: both facts stay current, the newer first, each
labelled "may have changed" until a person settles it in the review queue."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, tzinfo
from typing import Any, Protocol, TypeVar

from sqlalchemy import select as sql_select
from sqlmodel import col, select

from dreamer.core.consolidate import Evidence
from dreamer.core.expiry import is_past
from dreamer.core.models import CURRENT_STATUSES, STATUSES, Memory, utcnow
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import context_markers, new_block_id
from dreamer.core.tokens import count_tokens
from dreamer.core.topics import describes_present
from dreamer.core.trust.memory_text import as_data
from dreamer.engine.extraction.untrusted import steered
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import SearchFilter
from dreamer.ingest.base import as_utc
from dreamer.online.ranking import rank
from dreamer.store.db import session_scope
from dreamer.store.held import MAY_HAVE_CHANGED, beside_successor, changing, newer_first

log = logging.getLogger(__name__)
S = TypeVar("S", bound="Slotted")
D = TypeVar("D", bound="Dated")

HIT_COLUMNS = (
    col(Memory.id),
    col(Memory.text),
    col(Memory.kind),
    col(Memory.status),
    col(Memory.evidence),
    col(Memory.created_at),
    col(Memory.valid_from),
    col(Memory.valid_until),
    col(Memory.last_seen),
    col(Memory.topic),
    col(Memory.cardinality),
    col(Memory.user_id),
    col(Memory.agent_id),
    col(Memory.project),
    col(Memory.team),
    col(Memory.untrusted),
)


# --------------------------------------------------------------------------- pure policy


def context_rank_key(m: Memory) -> tuple[int, int, float, float, str]:
    """Verified first, then evidence (distinct sessions), importance, recency, id."""
    sessions = len({e.get("session_id") for e in (m.evidence or [])})
    return (0 if m.status == "verified" else 1, -sessions, -m.importance, -m.last_seen.timestamp(), m.id)


class Slotted(Protocol):
    """What `newest_in_slot` reads of a memory or a hit."""

    topic: str | None
    cardinality: str | None
    valid_from: datetime
    status: str


def _slot(m: Slotted) -> str | None:
    """The single-valued topic a current memory fills (history, superseded or forgotten, fills none)."""
    current = m.topic is not None and m.cardinality == "one" and m.status in CURRENT_STATUSES
    return m.topic if current else None


def newest_in_slot(items: Sequence[S]) -> list[S]:
    """`items` in order, but within each single-valued topic the newest value takes the best
    place among them and the older ones follow it: a slot left with two current values (the
    judge found them compatible, or none judged) never reads the older one as current."""
    places: dict[str, list[int]] = {}
    for i, m in enumerate(items):
        if (slot := _slot(m)) is not None:
            places.setdefault(slot, []).append(i)
    out = list(items)
    for idx in places.values():
        newest_first = sorted((items[i] for i in idx), key=lambda m: as_utc(m.valid_from), reverse=True)
        for i, m in zip(idx, newest_first):
            out[i] = m
    return out


def only_newest_in_slot(items: Sequence[S]) -> list[S]:
    """`items` without the older values of each single-valued topic (what the context block injects)."""
    seen: set[str] = set()
    out = []
    for m in newest_in_slot(items):
        slot = _slot(m)
        if slot is None or slot not in seen:
            out.append(m)
        if slot is not None:
            seen.add(slot)
    return out


class Dated(Protocol):
    """What `present_first` reads of a memory or a hit: until when it is current."""

    valid_until: datetime | None


def present_first(items: Sequence[D], now: datetime) -> list[D]:
    """`items` in order, but those past at `now` after every current one."""
    return [m for m in items if not is_past(m.valid_until, now)] + [m for m in items if is_past(m.valid_until, now)]


def past_mark(until: datetime | None, now: datetime, tz: tzinfo = UTC) -> str:
    """The mark of a fact whose time is over at `now`, with the day it ended in `tz`
    (" (past: 2027-02-15)"); "" for one still current."""
    if until is None or not is_past(until, now):
        return ""
    return f" (past: {as_utc(until).astimezone(tz).date().isoformat()})"


def context_line(m: Memory, now: datetime | None = None, tz: tzinfo = UTC, *, changing: bool = False) -> str:
    """One line of the context block: a fact whose time is over at `now` says so, with the day it
    ended; one side of a change waiting for a person (`changing`) that it "may have changed"; a
    present state says when it was last confirmed."""
    if changing:
        return f"- {as_data(m.text)} ({MAY_HAVE_CHANGED})"
    if mark := past_mark(m.valid_until, now or utcnow(), tz):
        return f"- {as_data(m.text)}{mark}"
    if describes_present(m.text, m.kind):
        return f"- {as_data(m.text)} (as of {as_utc(m.last_seen).date().isoformat()})"
    return f"- {as_data(m.text)}"


def cut_to_budget(lines: list[str], budget: int, *, overhead: int = 0) -> list[str]:
    """The longest prefix of `lines` whose token count (plus overhead) fits the budget."""
    kept: list[str] = []
    used = overhead
    for line in lines:
        cost = count_tokens(line) + 1
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return kept


# --------------------------------------------------------------------------- recall


@dataclass
class RecallHit:
    memory_id: str
    text: str
    kind: str
    status: str
    score: float
    evidence: list[Evidence]
    created_at: datetime
    valid_from: datetime
    last_seen: datetime
    topic: str | None = None
    cardinality: str | None = None
    rank: int = 0
    valid_until: datetime | None = None
    past: bool = False  # its time is over (`valid_until` before the recall's now)
    untrusted: bool = False  # flagged as resting on no line of the user's (never for steering)
    changed_with: str | None = None  # the other side of a change waiting for a person ("may have changed")

    def as_json(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "text": self.text,
            "kind": self.kind,
            "status": self.status,
            "score": round(self.score, 6),
            "evidence": self.evidence,
            "rank": self.rank,
            "created_at": self.created_at.isoformat(),
            "valid_from": self.valid_from.isoformat(),
            "last_seen": as_utc(self.last_seen).isoformat(),
            "topic": self.topic,
            "valid_until": as_utc(self.valid_until).isoformat() if self.valid_until is not None else None,
            "past": self.past,
            "may_have_changed": self.changed_with is not None,
            "changed_with": self.changed_with,
        }


@dataclass
class RecallResult:
    query: str
    mode: str  # hybrid | dense | text | text-only
    hits: list[RecallHit] = field(default_factory=list)
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"query": self.query, "mode": self.mode, "note": self.note, "hits": [h.as_json() for h in self.hits]}


def recall(
    rt: Runtime,
    query: str,
    scope: Scope,
    *,
    k: int | None = None,
    kinds: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    include_all: bool = False,
    now: datetime | None = None,
    past_last: bool = True,
    exact: bool = False,
) -> RecallResult:
    """The k best current memories of `scope` for `query`, ranked by `dreamer.ranking` (dense +
    BM25 fused by weight with the speaker match, or one search alone; BM25 alone without an
    embedder), those whose time is over at `now` (default: the present) marked past and, with
    `past_last` (a recall for the present, not one about what happened), after the others. With
    `exact`, only memories owned by exactly `scope` (a team's: no agent's among them)."""
    st = rt.settings
    k = k or st.recall_k
    flt = SearchFilter(
        kinds=kinds,
        statuses=list(STATUSES) if include_all else list(CURRENT_STATUSES),
        since=_epoch(since),
        until=_epoch(until),
        exact_scope=exact,
    )
    limit = max(st.candidate_multiplier * k, st.recall_candidates)
    ranked = rank(rt, query, scope, limit, flt, head=k)
    result = RecallResult(query, ranked.mode, note=ranked.note)
    seen = Seen(scope, include_all, exact)
    result.hits = _load_best(rt, ranked.ranked, seen, k, now or utcnow(), past_last)
    return result


@dataclass(frozen=True)
class Seen:
    """What a recall may return: memories of `scope` (owned by exactly it with `exact`), every
    status with `include_all`."""

    scope: Scope
    include_all: bool = False
    exact: bool = False

    def shows(self, m: Any) -> bool:
        inside = self.scope.owns(m) if self.exact else self.scope.matches(m)
        return inside and (self.include_all or m.status in CURRENT_STATUSES)


def _load_best(
    rt: Runtime,
    ranked: list[tuple[str, float]],
    seen: Seen,
    k: int,
    now: datetime,
    past_last: bool = True,
) -> list[RecallHit]:
    """The first k candidates that SQL confirms, the current before the past, read window by
    window (the k best, then the rest): a stale index entry or a past fact dropped or moved here
    still does not cost a current hit, and a recall over many candidates reads only what it returns."""
    window = max(k, 1)
    hits = _load(rt, ranked[:window], seen, now)
    if sum(not (past_last and h.past) for h in hits) < k and len(ranked) > window:
        hits += _load(rt, ranked[window:], seen, now)
    if not past_last:
        return [replace(h, rank=i) for i, h in enumerate(newer_first(newest_in_slot(hits[:k])), start=1)]
    best = newer_first(present_first(newest_in_slot(present_first(hits, now)[:k]), now))
    return [replace(h, rank=i) for i, h in enumerate(best, start=1)]


def _epoch(when: datetime | None) -> float | None:
    """Epoch seconds; a naive datetime counts as UTC."""
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def _load(rt: Runtime, ranked: list[tuple[str, float]], seen: Seen, now: datetime) -> list[RecallHit]:
    """Read the hits back from SQL, the system of record, re-checking scope and status (only
    the columns a hit needs, on a plain connection). A memory flagged untrusted for steering is
    never a hit unless `include_all` asks for every memory (recall feeds prompts, as the context
    block does); one flagged only as resting on no line of the user's (the other speaker's
    words) is a hit, its evidence saying so (`untrusted`, `untrusted_reason`)."""
    if not ranked:
        return []
    ids = [i for i, _ in ranked]
    with rt.engine.connect() as conn:
        rows = {m.id: m for m in conn.execute(sql_select(*HIT_COLUMNS).where(col(Memory.id).in_(ids)))}
        pairs = changing(conn, seen.scope.user_id)
    out: list[RecallHit] = []
    for mid, score in ranked:
        m = rows.get(mid)
        if m is None or not seen.shows(m):
            continue
        evidence = list(m.evidence)
        if m.untrusted and not seen.include_all and steered(evidence):
            continue
        out.append(
            RecallHit(
                m.id,
                m.text,
                m.kind,
                m.status,
                score,
                evidence,
                m.created_at,
                m.valid_from,
                m.last_seen,
                m.topic,
                m.cardinality,
                valid_until=m.valid_until,
                past=is_past(m.valid_until, now),
                untrusted=bool(m.untrusted),
                changed_with=pairs.get(m.id),
            )
        )
    return out


# --------------------------------------------------------------------------- context


@dataclass
class ContextBlock:
    text: str
    memory_ids: list[str]
    tokens: int
    extra_kept: int = 0  # how many of the `extra` lines the budget left in

    def as_json(self) -> dict[str, Any]:
        return {"text": self.text, "memory_ids": self.memory_ids, "tokens": self.tokens}


def context(
    rt: Runtime,
    scope: Scope,
    *,
    budget_tokens: int | None = None,
    block_id: str | None = None,
    now: datetime | None = None,
    extra: Sequence[str] = (),
) -> ContextBlock:
    """Preferences and profile facts worth injecting, ranked and cut to the token budget, between
    markers of `block_id` (drawn afresh for each render unless given); those whose time is over
    at `now` (default: the present) are labelled past and come after the others. `extra` lines
    (rendered already: a project's code work) follow them, within the same budget."""
    now = now or utcnow()
    budget = budget_tokens if budget_tokens is not None else rt.settings.context_budget
    with session_scope(rt.engine) as s:
        rows = s.exec(
            select(Memory)
            .where(Memory.user_id == scope.user_id)
            .where(col(Memory.kind).in_(("preference", "profile")))
            .where(col(Memory.status).in_(CURRENT_STATUSES))
            .where(col(Memory.untrusted).is_(False))
        ).all()
        pairs = changing(s, scope.user_id)
    mine = [m for m in rows if scope.matches(m) and (m.status != "review_required" or m.id in pairs)]
    held = {m.id: m for m in mine if m.status == "review_required"}
    served = [m for m in mine if m.id not in held]
    ranked = present_first(only_newest_in_slot(present_first(sorted(served, key=context_rank_key), now)), now)
    ranked = beside_successor(ranked, held, pairs)
    lines = [context_line(m, now, rt.settings.tz, changing=m.id in pairs) for m in ranked]
    opening, closing = context_markers(block_id or new_block_id())
    overhead = count_tokens(opening) + count_tokens(closing) + 2
    kept = cut_to_budget([*lines, *extra], budget, overhead=overhead)
    if not kept:
        return ContextBlock("", [], 0)
    text = "\n".join([opening, *kept, closing])
    return ContextBlock(text, [m.id for m in ranked[: len(kept)]], count_tokens(text), max(0, len(kept) - len(lines)))
