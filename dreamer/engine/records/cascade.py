"""Cascade forget: a whole user, one of their sessions, a range of its messages, or one memory,
and everything derived from it. Forget means gone: what goes is deleted, not marked.

A memory whose only evidence lies in what is forgotten goes (with its history and daily-note
rows); one that also rests on other sessions loses that evidence (`unlink` event) and stays
verified only if the rest still verifies it. A memory without session evidence (written by a
person) is left alone. A session or range also takes its messages, daily notes and the
candidates dream runs rejected from it; a whole session its row, cursor and offloaded bodies.
A whole user loses every row that holds their words (sessions, messages, cursors, notes,
memories with their history, offloaded bodies, watched files, code work, teams), their index
points and their Markdown folder; nothing else. Then no copy is left in the files either
(`erasure`): the index is rewritten, the Markdown rendered again, a SQLite store rebuilt.
With `dry_run` nothing changes and the plan lists every place that holds the text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, delete, func, or_
from sqlmodel import Session as DBSession
from sqlmodel import SQLModel, col, select

from dreamer.core.consolidate import promoted_status
from dreamer.core.errors import NotFound
from dreamer.core.models import (
    CURRENT_STATUSES,
    REVIEWED_STATUSES,
    Cursor,
    DailyNote,
    DreamRun,
    ExperienceEntry,
    ExperienceEvent,
    Memory,
    MemoryEvent,
    Message,
    OffloadedBody,
    ProjectState,
    Session,
    Team,
    ViewDue,
    WatchedFile,
    utcnow,
)
from dreamer.engine.records.erasure import Place, follow, index_places, markdown_places
from dreamer.engine.runtime import Runtime
from dreamer.store import cabinet
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

Doomed = list[tuple[type[SQLModel], ColumnElement[bool]]]
"""The rows that go: (table, which rows), children before parents."""


@dataclass(frozen=True)
class Selection:
    """What to forget: a user's session (`session`: its external id), optionally only messages
    `first`..`last` of it (sequence numbers, inclusive); one `memory` of theirs (its id, or six
    or more of its first characters); neither: the whole user."""

    user_id: str
    session: str | None = None
    first: int | None = None
    last: int | None = None
    memory: str | None = None

    def describe(self) -> str:
        if self.memory is not None:
            return f"memory {self.memory} of user {self.user_id}"
        if self.session is None:
            return f"user {self.user_id}"
        if self.whole_session:
            return f"session {self.session}"
        return f"messages {self.first or 1}..{self.last or 'end'} of session {self.session}"

    @property
    def whole_session(self) -> bool:
        return self.session is not None and self.first is None and self.last is None

    def covers(self, seq: int) -> bool:
        return (self.first is None or seq >= self.first) and (self.last is None or seq <= self.last)


@dataclass
class Cascade:
    """What a cascade forget did (or, dry, would do)."""

    selection: Selection
    forgotten: list[str] = field(default_factory=list)  # memories that went
    unlinked: list[str] = field(default_factory=list)  # memories that lost some evidence and stay
    notes: int = 0  # daily-note rows removed
    messages: int = 0  # messages removed
    sessions: int = 0  # sessions removed
    places: list[Place] = field(default_factory=list)  # where the text was (tables, index, files)
    session_ids: list[int] = field(default_factory=list)  # the selected sessions' row ids
    index_seconds: float = 0.0  # how long rewriting the index took
    applied: bool = False

    def json(self) -> dict[str, Any]:
        data = {k: v for k, v in self.__dict__.items() if k != "session_ids"}
        return {**data, "selection": self.selection.describe(), "places": [p.json() for p in self.places]}


def _remaining(evidence: list[Any], sessions: dict[int, Selection]) -> list[Any]:
    """The evidence left once the selected sessions (or seqs of them) are taken out."""
    kept = []
    for item in evidence:
        key = item.get("session_id") if isinstance(item, dict) else None
        sel = sessions.get(key) if isinstance(key, int) else None
        if sel is None:
            kept.append(item)
            continue
        seqs = [q for q in item.get("seqs") or [] if not sel.covers(q)]
        if seqs and (sel.first is not None or sel.last is not None):
            kept.append({**item, "seqs": seqs})
    return kept


def _sessions(s: DBSession, sel: Selection) -> dict[int, Selection]:
    q = select(Session).where(col(Session.user_id) == sel.user_id)
    if sel.session is not None:
        q = q.where(col(Session.external_id) == sel.session)
    found = {sess.id: sel for sess in s.exec(q) if sess.id is not None}
    if sel.session is not None and not found:
        raise NotFound(f"no session {sel.session} of user {sel.user_id}")
    return found


def forget_derived(rt: Runtime, sel: Selection, *, dry_run: bool = False, actor: str | None = None) -> Cascade:
    """Forget `sel` and what was derived from it (see the module); the index, the Markdown and
    the SQL files follow at once. `actor`: who asked (a person's token name or role), kept in
    the event of each memory that only loses evidence (the others are gone with their history)."""
    whole_user = sel.session is None and sel.memory is None
    with session_scope(rt.engine) as s:
        result, doomed = _plan(s, sel, dry_run=dry_run, actor=actor)
        places = _count(s, doomed)
        if whole_user or sel.whole_session:
            rejected = _scrub_rejections(s, result.session_ids, dry_run=dry_run)
            places += [Place("sql", "dream_runs.rejections", rejected)] if rejected else []
        places += index_places(rt, result.forgotten)
        places += markdown_places(rt, sel.user_id, None if whole_user else result.forgotten)
        _tell(result, places)
        if dry_run:
            return result
        for table, which in doomed:
            s.execute(delete(table).where(which))
    result.index_seconds = follow(rt, sel.user_id, result.forgotten, whole_user=whole_user)
    result.applied = True
    log.info("forgot %s: %d memories, %d places", sel.describe(), len(result.forgotten), len(result.places))
    return result


def _tell(result: Cascade, places: list[Place]) -> None:
    result.places = places
    rows = {p.name: p.count for p in places if p.kind == "sql"}
    result.notes, result.messages, result.sessions = (rows.get(t, 0) for t in ("daily_notes", "messages", "sessions"))


def _count(s: DBSession, doomed: Doomed) -> list[Place]:
    """How many rows of each table would go (the tables with any)."""
    places = []
    for table, which in doomed:
        n = s.exec(select(func.count()).select_from(table).where(which)).one()
        if n:
            places.append(Place("sql", str(table.__tablename__), int(n)))
    return places


def _plan(s: DBSession, sel: Selection, *, dry_run: bool, actor: str | None = None) -> tuple[Cascade, Doomed]:
    if sel.memory is not None:
        return _plan_memory(s, sel)
    if sel.session is None:
        return _plan_user(s, sel)
    sessions = _sessions(s, sel)
    result = Cascade(sel, session_ids=list(sessions))
    live = (*CURRENT_STATUSES, *REVIEWED_STATUSES)
    q = select(Memory).where(col(Memory.user_id) == sel.user_id).order_by(col(Memory.id))
    for m in s.exec(q.with_for_update()).all():
        left = _remaining(list(m.evidence), sessions)
        if left == list(m.evidence):
            continue
        if not any(isinstance(e, dict) and e.get("session_id") is not None for e in left):
            result.forgotten.append(m.id)  # also one no longer current: its text goes all the same
        elif m.status in live:
            result.unlinked.append(m.id)
            if not dry_run:
                _unlink(s, m, left, sel, actor)
    return result, _doomed_in_session(s, sel, result.session_ids[0], result.forgotten)


def _doomed_in_session(s: DBSession, sel: Selection, session_id: int, memory_ids: list[str]) -> Doomed:
    """A session's rows that go (a range: its messages and notes there), with these memories."""
    notes: ColumnElement[bool] = col(DailyNote.memory_id).in_(memory_ids)
    messages: ColumnElement[bool]
    if sel.whole_session:
        messages = col(Message.session_id) == session_id
        notes = or_(notes, col(DailyNote.session_id) == session_id)
    else:
        messages = (col(Message.session_id) == session_id) & col(Message.seq).between(sel.first or 1, sel.last or 2**62)
        rows = s.exec(select(DailyNote).where(col(DailyNote.session_id) == session_id)).all()
        notes = or_(notes, col(DailyNote.id).in_([n.id for n in rows if any(map(sel.covers, _window(n)))]))
    doomed: Doomed = [
        (MemoryEvent, col(MemoryEvent.memory_id).in_(memory_ids)),
        (DailyNote, notes),
        (Memory, col(Memory.id).in_(memory_ids)),
        (Message, messages),
    ]
    if not sel.whole_session:
        return doomed
    offloads = (col(OffloadedBody.user_id) == sel.user_id) & (col(OffloadedBody.session_id) == sel.session)
    return doomed + [
        (Cursor, col(Cursor.session_id) == session_id),
        (Session, col(Session.id) == session_id),
        (OffloadedBody, offloads),
    ]


def _plan_memory(s: DBSession, sel: Selection) -> tuple[Cascade, Doomed]:
    """One memory: its row, history and daily-note rows."""
    m = _memory(s, sel)
    result = Cascade(sel, forgotten=[m.id])
    return result, [
        (MemoryEvent, col(MemoryEvent.memory_id) == m.id),
        (DailyNote, col(DailyNote.memory_id) == m.id),
        (Memory, col(Memory.id) == m.id),
    ]


def _memory(s: DBSession, sel: Selection) -> Memory:
    """The user's memory with this id, or the one whose id starts with it (six characters or more)."""
    given = sel.memory or ""
    q = select(Memory).where(col(Memory.user_id) == sel.user_id)
    found = s.exec(q.where(col(Memory.id) == given)).all()
    if not found and len(given) >= 6:
        found = s.exec(q.where(col(Memory.id).startswith(given, autoescape=True)).limit(2)).all()
    if len(found) > 1:
        raise NotFound(f"{given} starts the ids of several memories of user {sel.user_id}: give more of it")
    if not found:
        raise NotFound(f"no memory {given} of user {sel.user_id}")
    return found[0]


def _plan_user(s: DBSession, sel: Selection) -> tuple[Cascade, Doomed]:
    """Every row that holds the user's words, children first."""
    user = sel.user_id
    result = Cascade(sel, session_ids=list(_sessions(s, sel)))
    result.forgotten = list(s.exec(select(Memory.id).where(col(Memory.user_id) == user)).all())
    theirs = select(Memory.id).where(col(Memory.user_id) == user)
    sessions = result.session_ids
    return result, [
        (MemoryEvent, col(MemoryEvent.memory_id).in_(theirs)),
        (Memory, col(Memory.user_id) == user),
        (DailyNote, or_(col(DailyNote.user_id) == user, col(DailyNote.session_id).in_(sessions))),
        (Message, col(Message.session_id).in_(sessions)),
        (Cursor, col(Cursor.session_id).in_(sessions)),
        (Session, col(Session.id).in_(sessions)),
        (OffloadedBody, col(OffloadedBody.user_id) == user),
        (WatchedFile, col(WatchedFile.user_id) == user),
        (ViewDue, col(ViewDue.user_id) == user),
        (ExperienceEvent, col(ExperienceEvent.user_id) == user),  # code work and teams are the user's too
        (ExperienceEntry, col(ExperienceEntry.user_id) == user),
        (ProjectState, col(ProjectState.user_id) == user),
        (Team, col(Team.user_id) == user),
    ]


def _unlink(s: DBSession, m: Memory, left: list[Any], sel: Selection, actor: str | None = None) -> None:
    status = m.status
    if status == "verified":
        status = promoted_status("candidate", left, untrusted=m.untrusted)
    data = {"status": [m.status, status], "before": cabinet.restorable(m), "removed": len(m.evidence) - len(left)}
    if actor:
        data["actor"] = actor
    m.evidence, m.status, m.updated_at, m.indexed_at = left, status, utcnow(), None
    s.add(m)
    cabinet.record_event(s, m.id, "unlink", reason=f"forgot {sel.describe()}", data=data)


def _window(n: DailyNote) -> range:
    return range(n.window_start_seq, n.window_end_seq + 1)


def _scrub_rejections(s: DBSession, session_ids: Sequence[int], *, dry_run: bool) -> int:
    """Take the candidates dream runs rejected from these sessions (their text) out of the runs;
    how many."""
    taken = 0
    for run in s.exec(select(DreamRun).with_for_update()).all():
        kept = [r for r in run.rejections or [] if not (isinstance(r, dict) and r.get("session_id") in session_ids)]
        taken += len(run.rejections or []) - len(kept)
        if len(kept) != len(run.rejections or []) and not dry_run:
            run.rejections = kept
            s.add(run)
    return taken
