"""What the inspector's pages read: memories by scope with search and filters, one memory with
its evidence (the messages it came from) and history, runs with every change and rejection,
quarantined sessions, the review queue and the settings in effect (secrets masked). Each read
is narrowed to what the viewer may see: a user their own rows, the admin every user's."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import NotFound
from dreamer.core.models import Cursor, DreamRun, Memory, MemoryEvent, Message, Session
from dreamer.core.settings import Settings
from dreamer.engine.records.revert import RunChange, held_runs, run_changes
from dreamer.engine.records.review import ReviewItem, queue
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector.person import Viewer
from dreamer.store.db import session_scope

PAGE = 100
STATUSES = ("candidate", "verified", "review_required", "pending", "superseded", "forgotten", "reverted", "rejected")
_SECRET_WORDS = ("token", "key", "password", "secret", "url")  # a URL may carry a password


@dataclass(frozen=True)
class Filters:
    q: str = ""
    kind: str = ""
    status: str = ""
    user: str = ""


@dataclass
class MemoryPage:
    memory: Memory
    history: list[MemoryEvent]
    evidence: list[tuple[int, list[Message]]]  # session id, the messages cited


@dataclass
class RunPage:
    run: DreamRun
    changes: list[RunChange]
    rejections: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0


def memories(rt: Runtime, viewer: Viewer, f: Filters) -> list[Memory]:
    """The viewer's memories, newest first, narrowed by `f` (text search is case-insensitive)."""
    q = select(Memory)
    q = _owned(q, viewer, Memory, f.user)
    if f.q.strip():
        q = q.where(func.lower(col(Memory.text)).contains(f.q.strip().lower()))
    if f.kind:
        q = q.where(Memory.kind == f.kind)
    if f.status:
        q = q.where(Memory.status == f.status)
    q = q.order_by(col(Memory.updated_at).desc(), col(Memory.id)).limit(PAGE)
    with session_scope(rt.engine) as s:
        return list(s.exec(q).all())


def kinds(rt: Runtime, viewer: Viewer) -> list[str]:
    q = _owned(select(Memory.kind).distinct(), viewer, Memory, "")
    with session_scope(rt.engine) as s:
        return sorted(str(k) for k in s.exec(q).all())


def memory_page(rt: Runtime, viewer: Viewer, memory_id: str) -> MemoryPage:
    with session_scope(rt.engine) as s:
        m = s.get(Memory, memory_id)
        if m is None or not viewer.sees(m):
            raise NotFound(f"no memory {memory_id}")
        history = s.exec(
            select(MemoryEvent).where(MemoryEvent.memory_id == memory_id).order_by(col(MemoryEvent.id))
        ).all()
        return MemoryPage(m, list(history), _evidence(s, m))


def _evidence(s: DBSession, m: Memory) -> list[tuple[int, list[Message]]]:
    out = []
    for e in m.evidence or []:
        sid, seqs = e.get("session_id"), [int(x) for x in e.get("seqs", [])]
        if sid is None:
            continue
        rows = s.exec(
            select(Message).where(Message.session_id == int(sid), col(Message.seq).in_(seqs)).order_by(col(Message.seq))
        ).all()
        out.append((int(sid), list(rows)))
    return out


def runs(rt: Runtime, viewer: Viewer) -> list[DreamRun]:
    """The newest runs; a user sees those that changed their memories."""
    q = select(DreamRun).order_by(col(DreamRun.id).desc()).limit(PAGE)
    if not viewer.admin:
        touched = (
            select(MemoryEvent.run_id)
            .join(Memory, col(Memory.id) == col(MemoryEvent.memory_id))
            .where(Memory.user_id == viewer.user_id)
        )
        q = q.where(col(DreamRun.id).in_(touched))
    with session_scope(rt.engine) as s:
        return list(s.exec(q).all())


def run_page(rt: Runtime, viewer: Viewer, run_id: int) -> RunPage:
    with session_scope(rt.engine) as s:
        run = s.get(DreamRun, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        s.expunge(run)
    changes = run_changes(rt.engine, run_id, user_id=viewer.user_id)
    if not viewer.admin and not changes:
        raise NotFound(f"no run {run_id}")
    rejections = list(run.rejections or [])
    if not viewer.admin:
        with session_scope(rt.engine) as s:
            ids = {r.get("session_id") for r in rejections}
            own = set(s.exec(_owned(select(Session.id), viewer, Session, "").where(col(Session.id).in_(ids))).all())
        rejections = [r for r in rejections if r.get("session_id") in own]
    return RunPage(run, changes, rejections, held_runs(rt.engine).get(run_id, 0))


def quarantined(rt: Runtime, viewer: Viewer) -> list[tuple[Session, Cursor]]:
    q = select(Session, Cursor).join(Cursor, col(Cursor.session_id) == col(Session.id))
    q = _owned(q.where(Cursor.status == "quarantined"), viewer, Session, "").order_by(col(Session.id))
    with session_scope(rt.engine) as s:
        return [(a, b) for a, b in s.exec(q).all()]


def review_queue(rt: Runtime, viewer: Viewer) -> list[ReviewItem]:
    """What waits for a person: memories pending review and supersessions the guard held."""
    items = queue(rt.engine, user_id=viewer.user_id, limit=PAGE)
    return [i for i in items if viewer.agent_id is None or _agent_of(rt, i.memory_id) == viewer.agent_id]


def _agent_of(rt: Runtime, memory_id: str) -> str | None:
    with session_scope(rt.engine) as s:
        return s.exec(select(Memory.agent_id).where(Memory.id == memory_id)).first()


def settings_shown(settings: Settings) -> list[tuple[str, str]]:
    """Every setting in effect as (name, value), secrets masked."""
    out = []
    for name in sorted(type(settings).model_fields):
        value = getattr(settings, name)
        secret = any(word in name for word in _SECRET_WORDS)
        out.append((f"DREAMER_{name.upper()}", "••••••" if secret and value else str(value)))
    return out


def _owned(q: Any, viewer: Viewer, table: Any, user: str) -> Any:
    if viewer.admin:
        return q.where(table.user_id == user) if user else q
    q = q.where(table.user_id == viewer.user_id)
    if viewer.agent_id is not None:
        q = q.where(table.agent_id == viewer.agent_id)
    return q
