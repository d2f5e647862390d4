"""Cascade forget: everything derived from a session, a range of its messages, or a whole user.

A memory whose only evidence lies in what is forgotten is forgotten (`forget` event); one that
also rests on other sessions loses that evidence (`unlink` event) and stays verified only if the
rest still verifies it. A memory without session evidence (written by a person) is left alone.
The daily notes taken from the forgotten messages go too. A whole user loses every row that holds
their words (sessions, messages, cursors, notes, memories with their history, watched files, the
candidates dream runs rejected), their index points and their Markdown folder; nothing else.
With `dry_run` nothing changes and the plan says what would go.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import delete
from sqlmodel import Session as DBSession
from sqlmodel import col, select

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
    ProjectState,
    Session,
    Team,
    ViewDue,
    WatchedFile,
    utcnow,
)
from dreamer.engine.markdown import views as markdown
from dreamer.engine.runtime import Runtime
from dreamer.store import cabinet
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Selection:
    """What to forget: a user's session (`session`: its external id), optionally only messages
    `first`..`last` of it (sequence numbers, inclusive); no session: the whole user."""

    user_id: str
    session: str | None = None
    first: int | None = None
    last: int | None = None

    def describe(self) -> str:
        if self.session is None:
            return f"user {self.user_id}"
        if self.first is None and self.last is None:
            return f"session {self.session}"
        return f"messages {self.first or 1}..{self.last or 'end'} of session {self.session}"

    def covers(self, seq: int) -> bool:
        return (self.first is None or seq >= self.first) and (self.last is None or seq <= self.last)


@dataclass
class Cascade:
    """What a cascade forget did (or, dry, would do)."""

    selection: Selection
    forgotten: list[str] = field(default_factory=list)  # memories forgotten (or deleted, a whole user)
    unlinked: list[str] = field(default_factory=list)  # memories that lost some evidence and stay
    notes: int = 0  # daily notes removed
    messages: int = 0  # messages removed (a whole user)
    sessions: int = 0  # sessions removed (a whole user)
    applied: bool = False

    def json(self) -> dict[str, Any]:
        return {**self.__dict__, "selection": self.selection.describe()}


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
    """Forget what was derived from `sel` (see the module); the index and the Markdown follow
    once the caller drains the outbox (a whole user: at once). `actor`: who asked (a person's
    token name or role), kept in each event."""
    if sel.session is None:
        return _forget_user(rt, sel, dry_run=dry_run)
    result = Cascade(sel)
    with session_scope(rt.engine) as s:
        sessions = _sessions(s, sel)
        live = (*CURRENT_STATUSES, *REVIEWED_STATUSES)
        q = select(Memory).where(col(Memory.user_id) == sel.user_id, col(Memory.status).in_(live))
        for m in s.exec(q.order_by(col(Memory.id)).with_for_update()).all():
            left = _remaining(list(m.evidence), sessions)
            if len(left) == len(m.evidence) and left == list(m.evidence):
                continue
            if not any(isinstance(e, dict) and e.get("session_id") is not None for e in left):
                result.forgotten.append(m.id)
                if not dry_run:
                    cabinet.forget(s, m.id, reason=f"forgot {sel.describe()}", actor=actor)
                continue
            result.unlinked.append(m.id)
            if not dry_run:
                _unlink(s, m, left, sel, actor)
        result.notes = _drop_notes(s, sel, list(sessions), dry_run=dry_run)
        if not dry_run and sel.first is None and sel.last is None:
            _scrub_rejections(s, list(sessions))
        result.applied = not dry_run
    return result


def _unlink(s: DBSession, m: Memory, left: list[Any], sel: Selection, actor: str | None) -> None:
    status = m.status
    if status == "verified":
        status = promoted_status("candidate", left, untrusted=m.untrusted)
    data = {"status": [m.status, status], "before": cabinet.restorable(m), "removed": len(m.evidence) - len(left)}
    if actor:
        data["actor"] = actor
    m.evidence, m.status, m.updated_at, m.indexed_at = left, status, utcnow(), None
    s.add(m)
    cabinet.record_event(s, m.id, "unlink", reason=f"forgot {sel.describe()}", data=data)


def _drop_notes(s: DBSession, sel: Selection, session_ids: list[int], *, dry_run: bool) -> int:
    q = select(DailyNote).where(col(DailyNote.session_id).in_(session_ids))
    notes = [n for n in s.exec(q) if sel.first is None and sel.last is None or any(map(sel.covers, _window(n)))]
    if not dry_run:
        for n in notes:
            s.delete(n)
    return len(notes)


def _window(n: DailyNote) -> range:
    return range(n.window_start_seq, n.window_end_seq + 1)


def _forget_user(rt: Runtime, sel: Selection, *, dry_run: bool) -> Cascade:
    result = Cascade(sel)
    with session_scope(rt.engine) as s:
        session_ids = list(_sessions(s, sel))
        result.forgotten = list(s.exec(select(Memory.id).where(col(Memory.user_id) == sel.user_id)).all())
        result.sessions = len(session_ids)
        result.messages = len(s.exec(select(Message.id).where(col(Message.session_id).in_(session_ids))).all())
        result.notes = len(s.exec(select(DailyNote.id).where(col(DailyNote.user_id) == sel.user_id)).all())
        if dry_run:
            return result
        _delete_user_rows(s, sel.user_id, session_ids, result.forgotten)
    rt.index.delete(result.forgotten)
    shutil.rmtree(markdown.user_dir(rt.settings.workspace_dir, sel.user_id), ignore_errors=True)
    result.applied = True
    log.info("forgot user %s: %d memories, %d sessions", sel.user_id, len(result.forgotten), result.sessions)
    return result


def _delete_user_rows(s: DBSession, user_id: str, session_ids: list[int], memory_ids: list[str]) -> None:
    """Every row that holds the user's words, children first."""
    s.execute(delete(MemoryEvent).where(col(MemoryEvent.memory_id).in_(memory_ids)))
    s.execute(delete(Memory).where(col(Memory.user_id) == user_id))
    s.execute(delete(DailyNote).where(col(DailyNote.user_id) == user_id))
    s.execute(delete(DailyNote).where(col(DailyNote.session_id).in_(session_ids)))
    s.execute(delete(Message).where(col(Message.session_id).in_(session_ids)))
    s.execute(delete(Cursor).where(col(Cursor.session_id).in_(session_ids)))
    s.execute(delete(Session).where(col(Session.id).in_(session_ids)))
    s.execute(delete(WatchedFile).where(col(WatchedFile.user_id) == user_id))
    s.execute(delete(ViewDue).where(col(ViewDue.user_id) == user_id))
    for table in (ExperienceEvent, ExperienceEntry, ProjectState, Team):  # code work and teams are the user's too
        s.execute(delete(table).where(col(table.user_id) == user_id))
    _scrub_rejections(s, session_ids)


def _scrub_rejections(s: DBSession, session_ids: list[int]) -> None:
    """Take the candidates dream runs rejected from these sessions (their text) out of the runs."""
    for run in s.exec(select(DreamRun).with_for_update()).all():
        kept = [r for r in run.rejections or [] if not (isinstance(r, dict) and r.get("session_id") in session_ids)]
        if len(kept) != len(run.rejections or []):
            run.rejections = kept
            s.add(run)
