"""Writes to the cabinet (memories and their history), inside a caller's transaction.

Correction never deletes: a superseded memory keeps its row with a validity end and a
pointer to its successor; every change leaves a `memory_events` row."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import insert
from sqlmodel import Session as DBSession
from sqlmodel import select

from dreamer.core.consolidate import content_hash, merge_evidence, promoted_status
from dreamer.core.errors import NotFound
from dreamer.core.models import CURRENT_STATUSES, Memory, MemoryEvent, new_memory_id, utcnow
from dreamer.core.scope import Scope

log = logging.getLogger(__name__)


def record_event(
    s: DBSession,
    memory_id: str,
    event: str,
    *,
    reason: str | None = None,
    run_id: int | None = None,
    data: dict | None = None,
) -> None:
    s.add(MemoryEvent(memory_id=memory_id, event=event, reason=reason, run_id=run_id, data=data))


def memory_row(
    *,
    user_id: str,
    kind: str,
    text: str,
    source: str,
    evidence: list[dict],
    agent_id: str | None = None,
    project: str | None = None,
    team: str | None = None,
    importance: float = 0.5,
    tags: list[str] | None = None,
    untrusted: bool = False,
    memory_id: str | None = None,
    now: datetime,
) -> dict:
    """Every column of a new memory row, waiting in the outbox."""
    return {
        "id": memory_id or new_memory_id(),
        "user_id": user_id,
        "agent_id": agent_id,
        "project": project,
        "team": team,
        "kind": kind,
        "text": text,
        "content_hash": content_hash(text),
        "status": promoted_status("candidate", evidence, untrusted=untrusted),
        "source": source,
        "evidence": evidence,
        "tags": tags or [],
        "importance": importance,
        "untrusted": untrusted,
        "valid_from": now,
        "valid_to": None,
        "superseded_by": None,
        "created_at": now,
        "updated_at": now,
        "last_seen": now,
        "indexed_at": None,
    }


def event_row(
    memory_id: str,
    event: str,
    *,
    reason: str | None = None,
    run_id: int | None = None,
    data: dict | None = None,
    now: datetime,
) -> dict:
    return {"memory_id": memory_id, "event": event, "reason": reason, "run_id": run_id, "data": data, "created_at": now}


def insert_memories(s: DBSession, rows: list[dict], events: list[dict]) -> None:
    """New memories, then their events, as two statements in the caller's transaction."""
    if rows:
        s.execute(insert(Memory.__table__), rows)  # type: ignore[arg-type]
    if events:
        s.execute(insert(MemoryEvent.__table__), events)  # type: ignore[arg-type]


def add_memory(
    s: DBSession,
    *,
    user_id: str,
    kind: str,
    text: str,
    source: str,
    evidence: list[dict],
    agent_id: str | None = None,
    project: str | None = None,
    team: str | None = None,
    importance: float = 0.5,
    tags: list[str] | None = None,
    untrusted: bool = False,
    run_id: int | None = None,
    reason: str = "new",
    memory_id: str | None = None,
    now: datetime | None = None,
) -> Memory:
    now = now or utcnow()
    m = Memory(
        **memory_row(
            user_id=user_id,
            agent_id=agent_id,
            project=project,
            team=team,
            kind=kind,
            text=text,
            source=source,
            evidence=evidence,
            importance=importance,
            tags=tags,
            untrusted=untrusted,
            memory_id=memory_id,
            now=now,
        )
    )
    s.add(m)
    s.flush()  # the row exists before its event (no relationship() tells the unit of work the order)
    record_event(s, m.id, "add", reason=reason, run_id=run_id, data={"evidence": evidence})
    return m


def merge_into(
    s: DBSession,
    m: Memory,
    evidence: list[dict],
    *,
    run_id: int | None = None,
    reason: str = "merged",
    importance: float | None = None,
    now: datetime | None = None,
) -> Memory:
    now = now or utcnow()
    before = m.status
    m.evidence = merge_evidence(list(m.evidence), evidence)
    m.status = promoted_status(m.status, m.evidence, untrusted=m.untrusted)
    if importance is not None:
        m.importance = max(m.importance, importance)
    m.last_seen = m.updated_at = now
    m.indexed_at = None
    s.add(m)
    data = {"evidence": evidence, "status": [before, m.status]}
    record_event(s, m.id, "merge", reason=reason, run_id=run_id, data=data)
    return m


def supersede(
    s: DBSession,
    old: Memory,
    new_id: str,
    *,
    run_id: int | None = None,
    reason: str = "superseded",
    now: datetime | None = None,
) -> None:
    now = now or utcnow()
    old.status = "superseded"
    old.valid_to = now
    old.superseded_by = new_id
    old.updated_at = now
    old.indexed_at = None
    s.add(old)
    record_event(s, old.id, "supersede", reason=reason, run_id=run_id, data={"by": new_id})


def forget(s: DBSession, memory_id: str, *, reason: str, user_id: str | None = None) -> Memory:
    m = s.get(Memory, memory_id)
    if m is None or (user_id is not None and m.user_id != user_id):
        raise NotFound(f"no memory {memory_id}")
    if m.status == "forgotten":
        return m
    before = m.status
    m.status = "forgotten"
    m.valid_to = m.updated_at = utcnow()
    m.indexed_at = None
    s.add(m)
    record_event(s, m.id, "forget", reason=reason, data={"status": [before, "forgotten"]})
    return m


@dataclass(frozen=True)
class Known:
    """What the cabinet already holds for a batch of content hashes."""

    current: dict  # hash -> row (id, text, kind, content_hash, status) of a current memory
    forgotten: frozenset[str]  # hashes of memories a person forgot


def known_hashes(s: DBSession, user_id: str, hashes: list[str], *, owner: Scope | None = None) -> Known:
    """One read of the user's memories with these content hashes: the current ones (with an
    `owner` scope, only those owned by exactly it; its None agent, project or team means none)
    and which hashes were forgotten within what `owner` sees (its None means any): a forget in
    one agent's or team's scope says nothing to another's."""
    if not hashes:
        return Known({}, frozenset())
    rows = s.exec(
        select(
            Memory.id,
            Memory.user_id,
            Memory.text,
            Memory.kind,
            Memory.content_hash,
            Memory.status,
            Memory.agent_id,
            Memory.project,
            Memory.team,
        )
        .where(Memory.user_id == user_id)
        .where(Memory.content_hash.in_(hashes))
        .where(Memory.status.in_((*CURRENT_STATUSES, "forgotten")))
        .order_by(Memory.created_at, Memory.id)
    ).all()
    current = {r.content_hash: r for r in rows if r.status in CURRENT_STATUSES and (owner is None or owner.owns(r))}
    return Known(
        current,
        frozenset(r.content_hash for r in rows if r.status == "forgotten" and (owner is None or owner.matches(r))),
    )


def current_query(user_id: str, *columns):
    """The user's current memories, oldest first: whole rows, or only `columns`."""
    q = select(*columns) if columns else select(Memory)
    return (
        q.where(Memory.user_id == user_id)
        .where(Memory.status.in_(CURRENT_STATUSES))
        .order_by(Memory.created_at, Memory.id)
    )


def current_memories(s: DBSession, user_id: str) -> list[Memory]:
    return list(s.exec(current_query(user_id)).all())
