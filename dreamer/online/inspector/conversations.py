"""The conversation browser: the sessions the viewer may see (newest first, paged, with how far
the dreamer has read each), and one session with its messages and what each produced: the
memories whose evidence cites it and the daily notes taken from it. From a session the person
goes on to forget what came from it (`records`, a dry run first)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import or_
from sqlalchemy import select as sa_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import NotFound
from dreamer.core.models import Cursor, DailyNote, Memory, Message, Session
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector import queries as q
from dreamer.online.inspector.login import Login, Logins
from dreamer.online.inspector.paging import Paged, Paging, fetch_page, paging_of
from dreamer.online.inspector.person import Viewer
from dreamer.online.inspector.render import page
from dreamer.store.db import session_scope

MAX_ROW_DIGITS = 18  # a session's number fits a signed 64-bit integer


@dataclass(frozen=True)
class Produced:
    """A memory a session's messages are evidence for."""

    memory_id: str
    text: str
    kind: str
    status: str
    seqs: list[int]  # the messages it cites (none: the session as a whole)


@dataclass
class Conversation:
    session: Session
    cursor: Cursor | None
    messages: Paged[Message]
    produced: list[Produced] = field(default_factory=list)
    notes: list[DailyNote] = field(default_factory=list)

    def produced_by(self, seq: int) -> list[Produced]:
        """The memories that cite message `seq`."""
        return [p for p in self.produced if seq in p.seqs]


def sessions(
    rt: Runtime, viewer: Viewer, words: str, user: str, paging: Paging
) -> Paged[tuple[Session, Cursor | None]]:
    """The viewer's sessions, last touched first, narrowed to those whose id or title holds `words`."""
    sel = select(Session, Cursor).join(Cursor, col(Cursor.session_id) == col(Session.id), isouter=True)
    sel = viewer.narrow(sel, Session, user)
    if words.strip():
        like = words.strip().lower()
        sel = sel.where(
            or_(
                col(Session.external_id).contains(words.strip(), autoescape=True),
                col(Session.title).ilike(f"%{like}%"),
            )
        )
    sel = sel.order_by(col(Session.updated_at).desc(), col(Session.id).desc())
    with session_scope(rt.engine) as s:
        found = fetch_page(s, sel, paging)
    return Paged([(a, b) for a, b in found.rows], found.total, paging)


def conversation(rt: Runtime, viewer: Viewer, key: str, paging: Paging) -> Conversation:
    """One session (by its number, or by its own id when the viewer has one session of that id)
    with a page of its messages and what it produced."""
    with session_scope(rt.engine) as s:
        sess = _session(s, viewer, key)
        assert sess.id is not None
        messages = select(Message).where(Message.session_id == sess.id).order_by(col(Message.seq))
        notes = select(DailyNote).where(DailyNote.session_id == sess.id).order_by(col(DailyNote.window_start_seq))
        return Conversation(
            sess,
            s.get(Cursor, sess.id),
            fetch_page(s, messages, paging),
            _produced(s, sess),
            list(s.exec(notes).all()),
        )


def _session(s: DBSession, viewer: Viewer, key: str) -> Session:
    found = s.get(Session, int(key)) if key.isdigit() and len(key) <= MAX_ROW_DIGITS else None
    if found is None:
        rows = s.exec(viewer.narrow(select(Session).where(Session.external_id == key), Session).limit(2)).all()
        found = rows[0] if len(rows) == 1 else None
    if found is None or not viewer.sees(found):
        raise NotFound(f"no session {key}")
    return found


def _produced(s: DBSession, sess: Session) -> list[Produced]:
    rows = s.execute(
        sa_select(col(Memory.id), col(Memory.text), col(Memory.kind), col(Memory.status), col(Memory.evidence))
        .where(col(Memory.user_id) == sess.user_id)
        .order_by(col(Memory.created_at), col(Memory.id))
    ).all()
    out = []
    for mid, text, kind, status, evidence in rows:
        cited = [e for e in evidence or [] if isinstance(e, dict) and e.get("session_id") == sess.id]
        if cited:
            seqs = sorted({int(x) for e in cited for x in e.get("seqs") or []})
            out.append(Produced(mid, text, kind, status, seqs))
    return out


def conversation_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("/conversations")
    def listed(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        words, user = request.query_params.get("q", ""), request.query_params.get("user", "")
        rows = sessions(rt, login.viewer, words, user, paging_of(request))
        users = q.users(rt, login.viewer)
        return page(request, "conversations.html", login, p=rows, words=words, user=user, users=users)

    @router.get("/conversations/{key}")
    def one(request: Request, key: str, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "conversation.html", login, c=conversation(rt, login.viewer, key, paging_of(request)))
