"""What a person does to the store by hand (the inspector's actions): add a memory, edit its
text, confirm it, forget it, restore one that was forgotten, release a quarantined session. Each
is one SQL transaction under the user's locks, recorded as a history event without a run that
names who acted (`data["actor"]`: the token's name or role), and followed by the index and the
Markdown view (`outbox.drain`), as an agent's write is. A memory is named by its id or by its
first characters (the CLI prints twelve), as `find_memory` resolves them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import DreamerError, NotFound
from dreamer.core.models import Cursor, Memory, MemoryEvent, Session, utcnow
from dreamer.core.scope import Scope
from dreamer.core.trust.memory_text import stored_text
from dreamer.core.trust.steering import steering_reason
from dreamer.engine import outbox
from dreamer.engine.records.reprocess import reset_cursors
from dreamer.engine.runtime import Runtime
from dreamer.online.agent_writes import WriteRejected, remember, user_lock
from dreamer.store import cabinet
from dreamer.store.by_hand import set_by_hand
from dreamer.store.db import session_scope

CURRENT = ("candidate", "verified", "review_required")
SHORT_ID = 6  # the fewest first characters of a memory's id that name it
ID_CHARS = 32


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
    name: str | None = None  # the token's name, when its grant gives one

    @property
    def admin(self) -> bool:
        return self.user_id is None

    @property
    def whole_user(self) -> bool:
        """Whether the viewer sees all of a user's store (the admin, or a token naming no agent)."""
        return self.user_id is None or self.agent_id is None

    @property
    def actor(self) -> str:
        """Who acted, as history records it: the token's name, else `admin` or the user's role."""
        if self.name:
            return self.name
        if self.user_id is None:
            return "admin"
        who = self.user_id + (f"/{self.agent_id}" if self.agent_id else "")
        return f"{who} ({'writer' if self.writer else 'reader'})"

    def sees(self, row: Any) -> bool:
        if self.user_id is None:
            return True
        return bool(row.user_id == self.user_id and (self.agent_id is None or row.agent_id == self.agent_id))

    def narrow(self, q: Any, table: Any, user: str = "") -> Any:
        """`q` narrowed to the rows of `table` the viewer sees (the admin: of `user`, if named)."""
        if self.user_id is None:
            return q.where(table.user_id == user) if user else q
        q = q.where(table.user_id == self.user_id)
        return q.where(table.agent_id == self.agent_id) if self.agent_id is not None else q

    def scope_of(self, user: str = "") -> Scope:
        """The recall scope of what the viewer sees (the admin: of the `user` named)."""
        owner = self.user_id or user.strip()
        if not owner:
            raise PersonRefused("name the user")
        return Scope(user_id=owner, agent_id=self.agent_id)


def find_memory(s: DBSession, viewer: Viewer, memory_id: str) -> Memory:
    """The viewer's memory with this id, or the one whose id starts with it (`SHORT_ID`
    characters or more, as the CLI prints them); NotFound for another user's."""
    key = memory_id.strip().lower()
    m = s.get(Memory, memory_id) or s.get(Memory, key)
    if m is None and SHORT_ID <= len(key) < ID_CHARS:
        q = viewer.narrow(select(Memory).where(col(Memory.id).startswith(key, autoescape=True)), Memory)
        found = s.exec(q.limit(2)).all()
        if len(found) > 1:
            raise PersonRefused(f"{memory_id} starts the ids of several memories: give more of it")
        m = found[0] if found else None
    if m is None or not viewer.sees(m):
        raise NotFound(f"no memory {memory_id}")
    return m


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
        set_by_hand(s, m, "edit", status="verified", reason="edited by a person", text=new, where=_by(viewer))

    return _by_hand(rt, viewer, memory_id, change)


def confirm_memory(rt: Runtime, viewer: Viewer, memory_id: str) -> Memory:
    """A person's word that a current memory is right: `verified`."""

    def change(s: DBSession, m: Memory) -> None:
        if m.status not in CURRENT:
            raise PersonRefused(f"memory {m.id} is {m.status}: only a current memory can be confirmed")
        set_by_hand(s, m, "confirm", status="verified", reason="confirmed by a person", where=_by(viewer))

    return _by_hand(rt, viewer, memory_id, change)


def restore_memory(rt: Runtime, viewer: Viewer, memory_id: str) -> Memory:
    """A forgotten memory back to the status it had when it was forgotten."""

    def change(s: DBSession, m: Memory) -> None:
        if m.status != "forgotten":
            raise PersonRefused(f"memory {m.id} is {m.status}: only a forgotten memory can be restored")
        back = _status_before_forget(s, m.id)
        data = {"status": ["forgotten", back], **_by(viewer)}
        m.status, m.valid_to = back, None
        cabinet.record_event(s, m.id, "restore", reason="restored by a person", data=data)

    return _by_hand(rt, viewer, memory_id, change)


def forget_by_hand(rt: Runtime, viewer: Viewer, memory_id: str, reason: str) -> Memory:
    """A person forgets a memory (kept for history, never served)."""

    def change(s: DBSession, m: Memory) -> None:
        cabinet.forget(s, m.id, reason=reason or "forgotten by a person", actor=viewer.actor)

    return _by_hand(rt, viewer, memory_id, change)


def add_memory(rt: Runtime, viewer: Viewer, user: str, text: str, kind: str) -> Memory:
    """A person's new memory for `user` (a user's login: their own), consolidated as an agent's
    write is (a restatement merges, a new value of a one-value slot replaces the old), then theirs:
    `human`, `verified`, a `confirm` event naming them."""
    _may_act(viewer)
    try:
        written = remember(rt, viewer.scope_of(user), text, kind)
    except WriteRejected as exc:
        raise PersonRefused(str(exc)) from exc

    def change(s: DBSession, m: Memory) -> None:
        if m.status in ("candidate", "verified"):
            set_by_hand(s, m, "confirm", status="verified", reason="added by a person", vouched=True, where=_by(viewer))

    return _by_hand(rt, viewer, written.memory.id, change)


def forget_many(rt: Runtime, viewer: Viewer, memory_ids: list[str], reason: str) -> list[str]:
    """Forget several memories at once: one transaction and one drain per owner, a `forget`
    event for each memory. NotFound, and nothing forgotten, if any is not the viewer's."""
    _may_act(viewer)
    with session_scope(rt.engine) as s:
        found = [(m.user_id, m.id) for m in (find_memory(s, viewer, i) for i in memory_ids)]
    for owner in sorted({user for user, _ in found}):
        with rt.user_locks.hold(owner), user_lock(owner):
            with session_scope(rt.engine) as s:
                for _, mid in (f for f in found if f[0] == owner):
                    cabinet.forget(s, mid, reason=reason or "forgotten by a person", actor=viewer.actor)
            outbox.drain(rt, users=[owner])
    return [mid for _, mid in found]


def release_session(rt: Runtime, viewer: Viewer, session_id: int) -> None:
    """A quarantined session back to the next pass, read from its start."""
    _may_act(viewer)
    with session_scope(rt.engine) as s:
        row = s.get(Session, session_id)
        cursor = s.get(Cursor, session_id)
        if row is None or not viewer.sees(row) or cursor is None or cursor.status != "quarantined":
            raise NotFound(f"no quarantined session {session_id}")
    reset_cursors(rt.engine, [session_id])


def _by(viewer: Viewer) -> dict[str, Any]:
    return {"actor": viewer.actor}


def _by_hand(rt: Runtime, viewer: Viewer, memory_id: str, change: Any) -> Memory:
    _may_act(viewer)
    with session_scope(rt.engine) as s:
        found = find_memory(s, viewer, memory_id)
        owner, memory_id = found.user_id, found.id
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
