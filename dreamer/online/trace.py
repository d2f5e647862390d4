"""Follow one fact through the three places: said in the ledger, stored in the cabinet,
indexed, found by recall, and injected by context onto the workbench."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, TypedDict

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.consolidate import Evidence, normalise
from dreamer.core.models import CURRENT_STATUSES, DreamRun, Memory, MemoryEvent, Message, Session
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import strip_injected
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import SearchFilter
from dreamer.online.code_work.trace import CodeWork, find_code_work, matches
from dreamer.online.recall import context, recall
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

EXCERPT_CHARS = 160
INDEX_PROBE = 50
REJECTION_RUNS = 200  # the latest dream runs whose rejections a trace reads


class HistoryEvent(TypedDict):
    """One event of a memory's history, as a trace shows it."""

    event: str
    reason: str | None
    run_id: int | None
    at: str


@dataclass
class Mention:
    session_id: int
    external_id: str
    seq: int
    role: str
    excerpt: str
    created_at: datetime


@dataclass
class Stored:
    memory_id: str
    text: str
    kind: str
    status: str
    source: str
    evidence: list[Evidence]
    history: list[HistoryEvent]
    indexed_at: datetime | None
    in_index: bool = False
    recall_rank: int | None = None
    context_position: int | None = None

    @property
    def current(self) -> bool:
        return self.status in CURRENT_STATUSES


class Rejected(TypedDict):
    """A candidate a dream run did not store, or an item of the model's reply it dropped, with why."""

    run_id: int
    session_id: int | None
    text: str
    reason: str


@dataclass
class Trace:
    fact: str
    user_id: str
    said: list[Mention] = field(default_factory=list)
    memories: list[Stored] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    code_work: list[CodeWork] = field(default_factory=list)
    recall_mode: str = ""
    recall_k: int = 0
    context_budget: int = 0

    @property
    def hops(self) -> dict[str, bool]:
        current = [m for m in self.memories if m.current]
        return {
            "said": bool(self.said),
            "remembered": bool(current),
            "indexed": any(m.indexed_at is not None and m.in_index for m in current),
            "recalled": any(m.recall_rank is not None for m in current),
            "injected": any(m.context_position is not None for m in current),
        }

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["hops"] = self.hops
        return data


def trace(
    rt: Runtime,
    fact: str,
    user_id: str,
    *,
    k: int | None = None,
    budget: int | None = None,
    limit: int = 20,
    scope: Scope | None = None,
) -> Trace:
    """Where `fact` is: the messages that said it, the memories it became, and how far each got;
    within `scope` when given (an agent's or a team's part of the user's), else all of the user's."""
    scope = scope or Scope(user_id=user_id)
    said = find_said(rt, fact, scope, limit=limit)
    out = Trace(fact, user_id, said, find_memories(rt, fact, scope, said), find_rejected(rt, fact, said))
    if scope.agent_id is None and scope.team is None:  # code work is the user's, by project
        out.code_work = find_code_work(rt.engine, fact, user_id, project=scope.project)
    for m in out.memories:
        m.in_index = in_index(rt, m, scope)
    found = recall(rt, fact, scope, k=k)
    out.recall_mode, out.recall_k = found.mode, k or rt.settings.recall_k
    ranks = {h.memory_id: h.rank for h in found.hits}
    out.context_budget = budget if budget is not None else rt.settings.context_budget
    block = context(rt, scope, budget_tokens=out.context_budget)
    positions = {mid: i + 1 for i, mid in enumerate(block.memory_ids)}
    for m in out.memories:
        m.recall_rank, m.context_position = ranks.get(m.memory_id), positions.get(m.memory_id)
    return out


def find_said(rt: Runtime, fact: str, scope: Scope, *, limit: int = 20) -> list[Mention]:
    """Messages of the scope's sessions that contain the fact (injected memory blocks excluded)."""
    words = sorted(normalise(fact).split(), key=len, reverse=True)
    if not words:
        return []
    probe = words[0].replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    query = select(Message, Session).join(Session, col(Session.id) == col(Message.session_id))
    with session_scope(rt.engine) as s:
        rows = s.exec(
            scope.where(query, Session)
            .where(func.lower(Message.content).like(f"%{probe}%", escape="\\"))
            .order_by(col(Message.session_id), col(Message.seq))
        ).all()
    out = []
    for m, sess in rows:
        text = strip_injected(m.content)
        if matches(fact, text):
            out.append(Mention(m.session_id, sess.external_id, m.seq, m.role, _excerpt(text, fact), m.created_at))
    return out[:limit]


def _excerpt(text: str, fact: str) -> str:
    flat = " ".join(text.split())
    at = flat.lower().find(fact.lower().split()[0]) if fact.split() else -1
    start = max(0, at - EXCERPT_CHARS // 2) if at >= 0 else 0
    piece = flat[start : start + EXCERPT_CHARS]
    return ("..." if start else "") + piece + ("..." if start + EXCERPT_CHARS < len(flat) else "")


def find_memories(rt: Runtime, fact: str, scope: Scope, said: list[Mention]) -> list[Stored]:
    """Memories of the scope, of any status, whose text holds the fact, or whose evidence is a
    message that said it."""
    spoken = {(s.session_id, s.seq) for s in said}
    with session_scope(rt.engine) as s:
        rows = s.exec(scope.where(select(Memory), Memory).order_by(col(Memory.created_at), col(Memory.id))).all()
        hits = [m for m in rows if matches(fact, m.text) or _rests_on(m, spoken)]
        events = _history(s, [m.id for m in hits])
    return [
        Stored(m.id, m.text, m.kind, m.status, m.source, list(m.evidence), events.get(m.id, []), m.indexed_at)
        for m in hits
    ]


def find_rejected(rt: Runtime, fact: str, said: list[Mention], *, runs: int = REJECTION_RUNS) -> list[Rejected]:
    """What the last `runs` dream runs rejected or dropped that holds the fact: from a session
    that said it, or (a dropped reply item, whose session is not known) in its own words."""
    sessions = {m.session_id for m in said}
    with session_scope(rt.engine) as s:
        rows = s.exec(select(DreamRun).order_by(col(DreamRun.id).desc()).limit(runs)).all()
    out: list[Rejected] = []
    for run in reversed(rows):
        for r in run.rejections or []:
            sid = r.get("session_id")
            if matches(fact, str(r.get("text", ""))) and (sid is None or sid in sessions):
                out.append(Rejected(run_id=run.id or 0, session_id=sid, text=r["text"], reason=r.get("reason", "")))
    return out


def _rests_on(m: Memory, spoken: set[tuple[int, int]]) -> bool:
    return any((e.get("session_id"), seq) in spoken for e in (m.evidence or []) for seq in e.get("seqs", []))


def _history(s: DBSession, ids: list[str]) -> dict[str, list[HistoryEvent]]:
    if not ids:
        return {}
    out: dict[str, list[HistoryEvent]] = {}
    rows = s.exec(select(MemoryEvent).where(col(MemoryEvent.memory_id).in_(ids)).order_by(col(MemoryEvent.id))).all()
    for e in rows:
        out.setdefault(e.memory_id, []).append(
            {"event": e.event, "reason": e.reason, "run_id": e.run_id, "at": e.created_at.isoformat()}
        )
    return out


def in_index(rt: Runtime, m: Stored, scope: Scope) -> bool:
    """Whether the index holds the memory: probed with its own text, any status."""
    flt = SearchFilter(statuses=None)
    hits = rt.index.search_text(m.text, scope, INDEX_PROBE, flt)
    if any(h.memory_id == m.memory_id for h in hits):
        return True
    if rt.embedder is None:
        return False
    vector = rt.embedder.embed([m.text])[0]
    return any(h.memory_id == m.memory_id for h in rt.index.search_dense(list(vector), scope, INDEX_PROBE, flt))


__all__ = [
    "Mention",
    "Rejected",
    "Stored",
    "Trace",
    "find_memories",
    "find_rejected",
    "find_said",
    "in_index",
    "matches",
    "trace",
]
