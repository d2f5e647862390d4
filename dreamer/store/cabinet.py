"""Writes to the cabinet (memories and their history), inside a caller's transaction.

Correction never deletes: a superseded memory keeps its row with a validity end and a
pointer to its successor; every change leaves a `memory_events` row."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any, overload

from sqlalchemy import ColumnElement, Select, SQLColumnExpression, and_
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select
from sqlmodel.sql.expression import SelectOfScalar

from dreamer.core.changeset import RESTORED, snapshot
from dreamer.core.consolidate import Evidence, merge_evidence, promoted_status
from dreamer.core.errors import NotFound
from dreamer.core.expiry import later_end
from dreamer.core.models import (
    CURRENT_STATUSES,
    REFUSED_STATUSES,
    REVIEWED_STATUSES,
    Memory,
    MemoryEvent,
    utcnow,
)
from dreamer.core.scope import Scope
from dreamer.store.gate import memory_row, new_memory

log = logging.getLogger(__name__)


def record_event(
    s: DBSession,
    memory_id: str,
    event: str,
    *,
    reason: str | None = None,
    run_id: int | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    s.add(MemoryEvent(memory_id=memory_id, event=event, reason=reason, run_id=run_id, data=data))


def event_row(
    memory_id: str,
    event: str,
    *,
    reason: str | None = None,
    run_id: int | None = None,
    data: dict[str, Any] | None = None,
    now: datetime,
) -> dict[str, Any]:
    return {"memory_id": memory_id, "event": event, "reason": reason, "run_id": run_id, "data": data, "created_at": now}


def add_memory(
    s: DBSession,
    *,
    user_id: str,
    kind: str,
    text: str,
    source: str,
    evidence: list[Evidence],
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
    m = new_memory(
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
    evidence: list[Evidence],
    *,
    run_id: int | None = None,
    reason: str = "merged",
    importance: float | None = None,
    now: datetime | None = None,
    data: dict[str, Any] | None = None,
    valid_until: datetime | None = None,
) -> Memory:
    """`data`: more to record in the merge event; `valid_until`: until when the fact is current
    as said this time (the later end is kept)."""
    now = now or utcnow()
    before, snap, old = m.status, restorable(m), list(m.evidence)
    m.evidence = merge_evidence(old, evidence)
    m.status = promoted_status(m.status, m.evidence, untrusted=m.untrusted)
    if importance is not None:
        m.importance = max(m.importance, importance)
    m.valid_until = later_end(m.valid_until, valid_until)
    m.last_seen = m.updated_at = now
    m.indexed_at = None
    s.add(m)
    recorded: dict[str, Any] = {
        "evidence": evidence,
        "added": m.evidence[len(old) :],  # what a revert takes out again
        "status": [before, m.status],
        "before": snap,
        **(data or {}),
    }
    record_event(s, m.id, "merge", reason=reason, run_id=run_id, data=recorded)
    return m


def supersede(
    s: DBSession,
    old: Memory,
    new_id: str,
    *,
    run_id: int | None = None,
    reason: str = "superseded",
    now: datetime | None = None,
    data: dict[str, Any] | None = None,
) -> None:
    """`old` superseded by `new_id`; `data`: more to record in the supersede event (a person's
    acceptance of a held one: `{"accepted": hold event id}`)."""
    now = now or utcnow()
    recorded = {"by": new_id, "status": [old.status, "superseded"], "before": restorable(old), **(data or {})}
    old.status = "superseded"
    old.valid_to = now
    old.superseded_by = new_id
    old.updated_at = now
    old.indexed_at = None
    s.add(old)
    record_event(s, old.id, "supersede", reason=reason, run_id=run_id, data=recorded)


def hold(s: DBSession, m: Memory, new_id: str, *, run_id: int | None, reason: str, now: datetime | None = None) -> None:
    """A supersession of `m` by `new_id` held for a person: `m` stays current, `review_required`."""
    now = now or utcnow()
    data = {"action": "supersede", "by": new_id, "status": [m.status, "review_required"], "before": restorable(m)}
    m.status = "review_required"
    m.updated_at = now
    m.indexed_at = None
    s.add(m)
    record_event(s, m.id, "hold", reason=reason, run_id=run_id, data=data)


def restorable(m: Memory) -> dict[str, Any]:
    """What a change overwrites of `m`, kept in its event so a revert can put it back."""
    return snapshot({k: getattr(m, k) for k in RESTORED})


def forget(
    s: DBSession,
    memory_id: str,
    *,
    reason: str,
    user_id: str | None = None,
    run_id: int | None = None,
    accepted: int | None = None,
    actor: str | None = None,
) -> Memory:
    """Forget `memory_id` (kept for history, never served); `actor`: who forgot it (a person's
    token name or role), kept in the event."""
    m = s.get(Memory, memory_id)
    if m is None or (user_id is not None and m.user_id != user_id):
        raise NotFound(f"no memory {memory_id}")
    if m.status == "forgotten":
        return m
    data: dict[str, Any] = {"status": [m.status, "forgotten"], "before": restorable(m)}
    if accepted is not None:
        data["accepted"] = accepted
    if actor:
        data["actor"] = actor
    m.status = "forgotten"
    m.valid_to = m.updated_at = utcnow()
    m.indexed_at = None
    s.add(m)
    record_event(s, m.id, "forget", reason=reason, run_id=run_id, data=data)
    return m


@dataclass(frozen=True)
class KnownMemory:
    """The columns `known_hashes` reads of a memory: enough to match it and name its owner."""

    id: str
    user_id: str
    text: str
    kind: str
    content_hash: str
    status: str
    agent_id: str | None
    project: str | None
    team: str | None
    topic: str | None
    valid_from: datetime


_KNOWN_COLUMNS = (
    col(Memory.id),
    col(Memory.user_id),
    col(Memory.text),
    col(Memory.kind),
    col(Memory.content_hash),
    col(Memory.status),
    col(Memory.agent_id),
    col(Memory.project),
    col(Memory.team),
    col(Memory.topic),
    col(Memory.valid_from),
)
_OLDEST_FIRST = (col(Memory.created_at), col(Memory.id))


@dataclass(frozen=True)
class Known:
    """What the cabinet already holds for a batch of content hashes."""

    current: dict[str, KnownMemory]  # hash -> a current memory with it
    forgotten: frozenset[str]  # hashes of memories a person forgot or rejected


def known_hashes(s: DBSession, user_id: str, hashes: list[str], *, owner: Scope | None = None) -> Known:
    """One read of the user's memories with these content hashes: the current ones (with an
    `owner` scope, only those owned by exactly it; its None agent, project or team means none)
    and which hashes were forgotten within what `owner` sees (its None means any): a forget in
    one agent's or team's scope says nothing to another's."""
    if not hashes:
        return Known({}, frozenset())
    query = (
        sa_select(*_KNOWN_COLUMNS)
        .where(col(Memory.user_id) == user_id)
        .where(col(Memory.content_hash).in_(hashes))
        .where(col(Memory.status).in_((*CURRENT_STATUSES, *REVIEWED_STATUSES, *REFUSED_STATUSES)))
        .order_by(*_OLDEST_FIRST)
    )
    rows = [KnownMemory(**r._mapping) for r in s.execute(query).all()]
    live = (*CURRENT_STATUSES, *REVIEWED_STATUSES)  # a pending one gathers its restatements too
    current = {r.content_hash: r for r in rows if r.status in live and (owner is None or owner.owns(r))}
    return Known(
        current,
        frozenset(r.content_hash for r in rows if r.status in REFUSED_STATUSES and (owner is None or owner.matches(r))),
    )


def current_by_topic(
    s: DBSession, user_id: str, topics: set[str], *, owner: Scope | None = None
) -> dict[str, list[KnownMemory]]:
    """The user's current memories filling each of these slots, oldest first (with an `owner`
    scope, only those owned by exactly it): what a new value of the slot may replace."""
    if not topics:
        return {}
    query = (
        sa_select(*_KNOWN_COLUMNS)
        .where(_is_current(user_id))
        .where(col(Memory.topic).in_(sorted(topics)))
        .order_by(*_OLDEST_FIRST)
    )
    out: dict[str, list[KnownMemory]] = {}
    for r in s.execute(query).all():
        m = KnownMemory(**r._mapping)
        if m.topic is not None and (owner is None or owner.owns(m)):
            out.setdefault(m.topic, []).append(m)
    return out


def _is_current(user_id: str) -> ColumnElement[bool]:
    return and_(col(Memory.user_id) == user_id, col(Memory.status).in_(CURRENT_STATUSES))


@overload
def current_query(user_id: str) -> SelectOfScalar[Memory]: ...


@overload
def current_query(
    user_id: str, column: SQLColumnExpression[Any], /, *columns: SQLColumnExpression[Any]
) -> Select[*tuple[Any, ...]]: ...


def current_query(
    user_id: str, *columns: SQLColumnExpression[Any]
) -> SelectOfScalar[Memory] | Select[*tuple[Any, ...]]:
    """The user's current memories, oldest first: whole rows, or only `columns`."""
    if columns:
        return sa_select(*columns).where(_is_current(user_id)).order_by(*_OLDEST_FIRST)
    return select(Memory).where(_is_current(user_id)).order_by(*_OLDEST_FIRST)


def current_memories(s: DBSession, user_id: str) -> list[Memory]:
    return list(s.exec(current_query(user_id)).all())
