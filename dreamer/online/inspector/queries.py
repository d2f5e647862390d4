"""What the inspector's pages read: memories by scope with search and filters, one memory with
its evidence (the messages it came from), its history and the change held for it (old beside
new), runs with every change and rejection, quarantined sessions, the review queue and the
settings in effect (secrets masked). Each list is one page with the total it was cut from
(`paging`); each read is narrowed to what the viewer may see: a user their own rows, the admin
every user's."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func, or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import NotFound
from dreamer.core.models import Cursor, DreamRun, Memory, MemoryEvent, Message, Session
from dreamer.core.settings import Settings
from dreamer.engine.records.revert import RunChange, held_runs, run_changes
from dreamer.engine.records.review import ReviewItem, queue, queued_count
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector.paging import Paged, Paging, fetch_page
from dreamer.online.inspector.person import SHORT_ID, Viewer, find_memory
from dreamer.store.db import session_scope

_SECRET_WORDS = ("token", "key", "password", "secret", "url")  # a URL may carry a password
_HEX = re.compile(r"[0-9a-f]+")


@dataclass(frozen=True)
class Filters:
    q: str = ""
    kind: str = ""
    status: str = ""
    user: str = ""
    how: str = "text"  # text: the words appear in it; meaning: the API's hybrid recall


@dataclass
class Held:
    """A change that waits for a person, old beside new: what would be replaced (the held
    memory, or what a pending one would replace) and what would replace it."""

    old: list[Memory]
    new: Memory | None


@dataclass
class MemoryPage:
    memory: Memory
    history: list[MemoryEvent]
    evidence: list[tuple[int, list[Message]]]  # session id, the messages cited
    held: Held | None = None


@dataclass
class RunPage:
    run: DreamRun
    changes: list[RunChange]
    rejections: list[dict[str, Any]] = field(default_factory=list)
    held: int = 0


@dataclass(frozen=True)
class ReviewRow:
    """An item of the review queue with the texts of the change: now, and what it would become."""

    item: ReviewItem
    old: list[str]  # the text(s) it would replace (none: a new memory)
    new: str  # the text it would leave current


def memories(rt: Runtime, viewer: Viewer, f: Filters, paging: Paging) -> Paged[Memory]:
    """The viewer's memories, newest first, narrowed by `f`: the words of `f.q` in the text
    (case-insensitive), or `f.q` the first characters of the id (as the CLI prints it)."""
    q = viewer.narrow(select(Memory), Memory, f.user)
    words = f.q.strip()
    if words:
        found = func.lower(col(Memory.text)).contains(words.lower(), autoescape=True)
        key = words.lower()
        if len(key) >= SHORT_ID and _HEX.fullmatch(key):
            found = or_(found, col(Memory.id).startswith(key, autoescape=True))
        q = q.where(found)
    if f.kind:
        q = q.where(Memory.kind == f.kind)
    if f.status:
        q = q.where(Memory.status == f.status)
    q = q.order_by(col(Memory.updated_at).desc(), col(Memory.id))
    with session_scope(rt.engine) as s:
        return fetch_page(s, q, paging)


def users(rt: Runtime, viewer: Viewer) -> list[str]:
    """The users the viewer may pick: every user with a memory or a session (the admin), else their own."""
    if not viewer.admin:
        return [str(viewer.user_id)]
    with session_scope(rt.engine) as s:
        found = set(s.exec(select(Memory.user_id).distinct()).all()) | set(s.exec(select(Session.user_id).distinct()))
    return sorted(found)


def kinds(rt: Runtime, viewer: Viewer) -> list[str]:
    q = viewer.narrow(select(Memory.kind).distinct(), Memory)
    with session_scope(rt.engine) as s:
        return sorted(str(k) for k in s.exec(q).all())


def memory_page(rt: Runtime, viewer: Viewer, memory_id: str) -> MemoryPage:
    """One memory (by its id or its first characters) with its history, evidence and held change."""
    with session_scope(rt.engine) as s:
        m = find_memory(s, viewer, memory_id)
        history = s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == m.id).order_by(col(MemoryEvent.id))).all()
        return MemoryPage(m, list(history), _evidence(s, m), _held(s, m))


def _held(s: DBSession, m: Memory) -> Held | None:
    if m.status == "review_required":
        hold = s.exec(
            select(MemoryEvent)
            .where(MemoryEvent.memory_id == m.id, MemoryEvent.event == "hold")
            .order_by(col(MemoryEvent.id).desc())
        ).first()
        by = (hold.data or {}).get("by") if hold is not None else None
        return Held([m], s.get(Memory, str(by)) if by else None)
    if m.status == "pending":
        return Held(_held_for(s, m), m)
    return None


def _held_for(s: DBSession, successor: Memory) -> list[Memory]:
    """The held memories a pending one would replace."""
    q = (
        select(Memory, MemoryEvent)
        .join(MemoryEvent, col(Memory.id) == col(MemoryEvent.memory_id))
        .where(MemoryEvent.event == "hold", Memory.status == "review_required", Memory.user_id == successor.user_id)
    )
    return list({m.id: m for m, e in s.exec(q).all() if (e.data or {}).get("by") == successor.id}.values())


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


def runs(rt: Runtime, viewer: Viewer, paging: Paging) -> Paged[DreamRun]:
    """The runs, newest first; a user sees those that changed their memories."""
    q = select(DreamRun).order_by(col(DreamRun.id).desc())
    if not viewer.admin:
        touched = (
            select(MemoryEvent.run_id)
            .join(Memory, col(Memory.id) == col(MemoryEvent.memory_id))
            .where(Memory.user_id == viewer.user_id)
        )
        q = q.where(col(DreamRun.id).in_(touched))
    with session_scope(rt.engine) as s:
        return fetch_page(s, q, paging)


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
            own = set(s.exec(viewer.narrow(select(Session.id), Session).where(col(Session.id).in_(ids))).all())
        rejections = [r for r in rejections if r.get("session_id") in own]
    return RunPage(run, changes, rejections, held_runs(rt.engine).get(run_id, 0))


def quarantined(rt: Runtime, viewer: Viewer, paging: Paging) -> Paged[tuple[Session, Cursor]]:
    q = select(Session, Cursor).join(Cursor, col(Cursor.session_id) == col(Session.id))
    q = viewer.narrow(q.where(Cursor.status == "quarantined"), Session).order_by(col(Session.id))
    with session_scope(rt.engine) as s:
        found = fetch_page(s, q, paging)
    return Paged([(a, b) for a, b in found.rows], found.total, paging)


def review_queue(rt: Runtime, viewer: Viewer, paging: Paging, user: str = "") -> Paged[ReviewRow]:
    """What waits for a person, oldest first: memories pending review and supersessions the guard
    held, each with the text it would replace beside the text it would leave (the admin: of
    every user, or of `user`)."""
    who = {"user_id": viewer.user_id or user or None, "agent_id": viewer.agent_id}
    items = queue(rt.engine, **who, limit=paging.per, offset=paging.offset)
    total = queued_count(rt.engine, **who)
    ids = {i for it in items for i in (*it.replaces, it.replaced_by) if i}
    with session_scope(rt.engine) as s:
        texts = dict(s.exec(select(Memory.id, Memory.text).where(col(Memory.id).in_(ids))).all()) if ids else {}
    rows = []
    for it in items:
        if it.status == "review_required":
            rows.append(ReviewRow(it, [it.text], texts.get(it.replaced_by or "", "")))
        else:
            rows.append(ReviewRow(it, [texts.get(i, "") for i in it.replaces], it.text))
    return Paged(rows, total, paging)


def settings_shown(settings: Settings) -> list[tuple[str, str]]:
    """Every setting in effect as (name, value), secrets masked."""
    out = []
    for name in sorted(type(settings).model_fields):
        value = getattr(settings, name)
        secret = any(word in name for word in _SECRET_WORDS)
        out.append((f"DREAMER_{name.upper()}", "••••••" if secret and value else str(value)))
    return out
