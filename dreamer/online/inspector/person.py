"""What a person does to the store by hand (the inspector's actions): edit a memory's text,
confirm it, restore one that was forgotten, release a quarantined session. Each is one SQL
transaction under the user's locks, recorded as a history event without a run, and followed
by the index and the Markdown view (`outbox.drain`), as an agent's write is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import DreamerError, NotFound
from dreamer.core.models import Cursor, Memory, MemoryEvent, Session, utcnow
from dreamer.core.trust.memory_text import stored_text
from dreamer.core.trust.steering import steering_reason
from dreamer.engine import outbox
from dreamer.engine.records.reprocess import reset_cursors
from dreamer.engine.runtime import Runtime
from dreamer.online.agent_writes import user_lock
from dreamer.store import cabinet
from dreamer.store.by_hand import set_by_hand
from dreamer.store.db import session_scope

CURRENT = ("candidate", "verified", "review_required")


class PersonRefused(DreamerError):
    """A person's action that cannot apply to the memory as it is (say, editing a forgotten one)."""


class ReadOnly(PersonRefused):
    """The login may only look (a reader token)."""


def _may_act(viewer: Viewer) -> None:
    if not viewer.writer:
        raise ReadOnly("this login may only look: log in with a writer token to change anything")


@dataclass(frozen=True)
class Viewer:
    """Who acts: a user (sees and changes only their own memories) or the admin (every user's)."""

    user_id: str | None  # None: the admin
    agent_id: str | None = None
    writer: bool = True  # a reader token's login may look, not act

    @property
    def admin(self) -> bool:
        return self.user_id is None

    def sees(self, row: Any) -> bool:
        if self.user_id is None:
            return True
        return bool(row.user_id == self.user_id and (self.agent_id is None or row.agent_id == self.agent_id))


def edit_memory(rt: Runtime, viewer: Viewer, memory_id: str, text: str) -> Memory:
    """A person's new text for a current memory: kept as `human`, `verified`, the old text in history."""
    new = stored_text(text).strip()
    if not new:
        raise PersonRefused("the new text is empty")
    if reason := steering_reason(new):
        raise PersonRefused(f"not stored: the text tries to steer the memory system ({reason})")

    def change(s: DBSession, m: Memory) -> None:
        if m.status not in CURRENT:
            raise PersonRefused(f"memory {m.id} is {m.status}: restore it before editing")
        set_by_hand(s, m, "edit", status="verified", reason="edited by a person", text=new)

    return _by_hand(rt, viewer, memory_id, change)


def confirm_memory(rt: Runtime, viewer: Viewer, memory_id: str) -> Memory:
    """A person's word that a current memory is right: `verified`."""

    def change(s: DBSession, m: Memory) -> None:
        if m.status not in CURRENT:
            raise PersonRefused(f"memory {m.id} is {m.status}: only a current memory can be confirmed")
        set_by_hand(s, m, "confirm", status="verified", reason="confirmed by a person")

    return _by_hand(rt, viewer, memory_id, change)


def restore_memory(rt: Runtime, viewer: Viewer, memory_id: str) -> Memory:
    """A forgotten memory back to the status it had when it was forgotten."""

    def change(s: DBSession, m: Memory) -> None:
        if m.status != "forgotten":
            raise PersonRefused(f"memory {m.id} is {m.status}: only a forgotten memory can be restored")
        back = _status_before_forget(s, m.id)
        data = {"status": ["forgotten", back]}
        m.status, m.valid_to = back, None
        cabinet.record_event(s, m.id, "restore", reason="restored by a person", data=data)

    return _by_hand(rt, viewer, memory_id, change)


def forget_by_hand(rt: Runtime, viewer: Viewer, memory_id: str, reason: str) -> Memory:
    """A person forgets a memory (kept for history, never served)."""

    def change(s: DBSession, m: Memory) -> None:
        cabinet.forget(s, m.id, reason=reason or "forgotten by a person")

    return _by_hand(rt, viewer, memory_id, change)


def release_session(rt: Runtime, viewer: Viewer, session_id: int) -> None:
    """A quarantined session back to the next pass, read from its start."""
    _may_act(viewer)
    with session_scope(rt.engine) as s:
        row = s.get(Session, session_id)
        cursor = s.get(Cursor, session_id)
        if row is None or not viewer.sees(row) or cursor is None or cursor.status != "quarantined":
            raise NotFound(f"no quarantined session {session_id}")
    reset_cursors(rt.engine, [session_id])


def _by_hand(rt: Runtime, viewer: Viewer, memory_id: str, change: Any) -> Memory:
    _may_act(viewer)
    with session_scope(rt.engine) as s:
        found = s.get(Memory, memory_id)
        if found is None or not viewer.sees(found):
            raise NotFound(f"no memory {memory_id}")
        owner = found.user_id
    with rt.user_locks.hold(owner), user_lock(owner):
        with session_scope(rt.engine) as s:
            m = s.get(Memory, memory_id)
            if m is None:
                raise NotFound(f"no memory {memory_id}")
            change(s, m)
            m.updated_at, m.indexed_at = utcnow(), None
            s.add(m)
        outbox.drain(rt, users=[owner])  # indexes the change and renders the user's view
        with session_scope(rt.engine) as s:
            done = s.get(Memory, memory_id)
            assert done is not None
            return done


def _status_before_forget(s: DBSession, memory_id: str) -> str:
    q = (
        select(MemoryEvent)
        .where(MemoryEvent.memory_id == memory_id, MemoryEvent.event == "forget")
        .order_by(col(MemoryEvent.id).desc())
    )
    event = s.exec(q).first()
    status = (event.data or {}).get("status", ["candidate"])[0] if event is not None else "candidate"
    return status if status in CURRENT else "candidate"
