"""The review queue: what waits for a person's word. In review mode (`DREAMER_REVIEW_MODE`) new
memories from dreaming wait as `pending` (neither recalled, injected nor shown in the Markdown);
the supersessions the guard held (`review_required`, also what `runs accept` takes) wait here too.

A person accepts an item (a pending memory becomes current, and what it was to replace is
replaced), edits it (accepted in their words: a `human` record), or rejects it (`rejected`: the
same text is not proposed again, and what it was to replace stays as it was).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.consolidate import promoted_status
from dreamer.core.errors import NotAllowedNow, NotFound
from dreamer.core.models import CURRENT_STATUSES, Memory, MemoryEvent, utcnow
from dreamer.core.trust.memory_text import one_line, stored_text
from dreamer.store import cabinet
from dreamer.store.by_hand import set_by_hand
from dreamer.store.db import session_scope

QUEUED = ("pending", "review_required")


@dataclass(frozen=True)
class ReviewItem:
    """One item of the queue: a pending memory, or a current one whose replacement was held."""

    memory_id: str
    user_id: str
    kind: str
    text: str
    status: str  # pending | review_required
    reason: str | None  # why it was proposed (the add) or held (the hold)
    run_id: int | None
    replaces: list[str]  # pending: the current memories it would replace
    replaced_by: str | None  # review_required: the memory that would replace it

    def json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Reviewed:
    """What a person's word did: the memory, its status now, and the memories it replaced or kept."""

    memory_id: str
    user_id: str
    status: str
    replaced: list[str]
    kept: list[str]

    def json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _holds(s: DBSession, ids: list[str]) -> list[MemoryEvent]:
    """The latest hold event of each held memory in `ids` (the memory still `review_required`)."""
    q = (
        select(MemoryEvent)
        .join(Memory, col(Memory.id) == col(MemoryEvent.memory_id))
        .where(col(MemoryEvent.event) == "hold", col(Memory.status) == "review_required")
        .order_by(col(MemoryEvent.id))
    )
    if ids:
        q = q.where(col(MemoryEvent.memory_id).in_(ids))
    latest = {e.memory_id: e for e in s.exec(q).all()}
    return list(latest.values())


def _held_by(s: DBSession, successor: str) -> list[tuple[Memory, MemoryEvent]]:
    """The current memories whose supersession by `successor` is held, with the hold event."""
    q = (
        select(Memory, MemoryEvent)
        .join(MemoryEvent, col(Memory.id) == col(MemoryEvent.memory_id))
        .where(col(MemoryEvent.event) == "hold", col(Memory.status) == "review_required")
        .order_by(col(MemoryEvent.id))
    )
    return [(m, e) for m, e in s.exec(q).all() if (e.data or {}).get("by") == successor]


def _queued_rows(user_id: str | None, agent_id: str | None) -> Any:
    q = select(Memory).where(col(Memory.status).in_(QUEUED))
    if user_id is not None:
        q = q.where(col(Memory.user_id) == user_id)
    if agent_id is not None:
        q = q.where(col(Memory.agent_id) == agent_id)
    return q


def queue(
    engine: Engine, *, user_id: str | None = None, agent_id: str | None = None, limit: int = 200, offset: int = 0
) -> list[ReviewItem]:
    """What waits for a person, oldest first (of one user, and agent, if given), `limit` items
    from the `offset`th on."""
    with session_scope(engine) as s:
        q = _queued_rows(user_id, agent_id).order_by(col(Memory.created_at), col(Memory.id))
        rows = s.exec(q.offset(offset).limit(limit)).all()
        holds = {e.memory_id: e for e in _holds(s, [m.id for m in rows])}
        adds = _add_events(s, [m.id for m in rows if m.status == "pending"])
        items = []
        for m in rows:
            hold = holds.get(m.id)
            event = hold if m.status == "review_required" else adds.get(m.id)
            by = (hold.data or {}).get("by") if hold is not None else None
            replaces = [x.id for x, _ in _held_by(s, m.id)] if m.status == "pending" else []
            reason, run = (event.reason, event.run_id) if event is not None else (None, None)
            items.append(ReviewItem(m.id, m.user_id, m.kind, m.text, m.status, reason, run, replaces, by))
    return items


def queued_count(engine: Engine, *, user_id: str | None = None, agent_id: str | None = None) -> int:
    """How many items wait for a person (of one user, and agent, if given)."""
    q = _queued_rows(user_id, agent_id)
    with session_scope(engine) as s:
        return int(s.exec(select(func.count()).select_from(q.subquery())).one())


def _add_events(s: DBSession, ids: list[str]) -> dict[str, MemoryEvent]:
    if not ids:
        return {}
    q = select(MemoryEvent).where(col(MemoryEvent.memory_id).in_(ids), col(MemoryEvent.event) == "add")
    return {e.memory_id: e for e in s.exec(q).all()}


def _queued(s: DBSession, memory_id: str, user_id: str | None) -> Memory:
    m = s.get(Memory, memory_id, with_for_update=True)
    if m is None or (user_id is not None and m.user_id != user_id):
        raise NotFound(f"no memory {memory_id}")
    if m.status not in QUEUED:
        raise NotAllowedNow(f"memory {memory_id} is {m.status}, not waiting for review")
    return m


def accept(
    engine: Engine, memory_id: str, *, user_id: str | None = None, text: str | None = None, actor: str | None = None
) -> Reviewed:
    """Accept a queued memory (with `text`: in a person's words). A pending one becomes current
    and replaces what it was held to replace; a held one is replaced by its successor. `actor`
    (who accepted: a token's name or role) is kept in each event the acceptance records."""
    if text is not None:
        text = one_line(stored_text(text))
        if not text:
            raise NotAllowedNow("the text is empty")
    who = _who(actor)
    with session_scope(engine) as s:
        m = _queued(s, memory_id, user_id)
        if m.status == "review_required":
            return _accept_hold(s, m, who)
        return _accept_pending(s, m, text, who)


def _who(actor: str | None) -> dict[str, Any]:
    """What an event records of who acted: `{"actor": ...}`, or nothing when no one is named."""
    return {"actor": actor} if actor else {}


def _accept_pending(s: DBSession, m: Memory, text: str | None, who: dict[str, Any]) -> Reviewed:
    status = "verified" if text is not None else promoted_status("candidate", m.evidence, untrusted=m.untrusted)
    event = "edit" if text is not None else "accept"
    set_by_hand(s, m, event, status=status, reason="accepted in review", text=text, where=who)
    replaced = []
    for old, hold in _held_by(s, m.id):
        data = {"accepted": hold.id, **who}
        cabinet.supersede(s, old, m.id, run_id=hold.run_id, reason="accepted in review", data=data)
        replaced.append(old.id)
    return Reviewed(m.id, m.user_id, m.status, replaced, [])


def _accept_hold(s: DBSession, m: Memory, who: dict[str, Any]) -> Reviewed:
    [hold] = _holds(s, [m.id])
    by = str((hold.data or {}).get("by"))
    successor = s.get(Memory, by, with_for_update=True)
    if successor is None or successor.status not in (*CURRENT_STATUSES, "pending"):
        raise NotAllowedNow(f"its successor {by} is no longer current: reject it to keep {m.id}")
    if successor.status == "pending":
        _accept_pending(s, successor, None, who)  # replaces every memory held for it, this one too
    else:
        data = {"accepted": hold.id, **who}
        cabinet.supersede(s, m, by, run_id=hold.run_id, reason="accepted in review", data=data)
    return Reviewed(m.id, m.user_id, m.status, [m.id], [])


def reject(engine: Engine, memory_id: str, *, user_id: str | None = None, actor: str | None = None) -> Reviewed:
    """Reject a queued memory. A pending one becomes `rejected` (its text is not proposed again)
    and what it was to replace stays; a held one stays as it was, its replacement dropped."""
    who = _who(actor)
    with session_scope(engine) as s:
        m = _queued(s, memory_id, user_id)
        if m.status == "review_required":
            _release(s, m, who)
            return Reviewed(m.id, m.user_id, m.status, [], [m.id])
        data = {"status": [m.status, "rejected"], "before": cabinet.restorable(m), **who}
        m.status, m.updated_at, m.indexed_at = "rejected", utcnow(), None
        s.add(m)
        cabinet.record_event(s, m.id, "reject", reason="rejected in review", data=data)
        kept = [old.id for old, _ in _held_by(s, m.id)]
        for old, _ in _held_by(s, m.id):
            _release(s, old, who)
    return Reviewed(m.id, m.user_id, m.status, [], kept)


def _release(s: DBSession, m: Memory, who: dict[str, Any]) -> None:
    """A held memory back to what it was before the hold: its replacement is not going to happen."""
    [hold] = _holds(s, [m.id])
    was = ((hold.data or {}).get("status") or ["candidate"])[0]
    m.status, m.updated_at, m.indexed_at = was, utcnow(), None
    s.add(m)
    data = {"status": ["review_required", was], "of": hold.id, **who}
    cabinet.record_event(s, m.id, "keep", reason="its replacement was rejected in review", data=data)
