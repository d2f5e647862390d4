"""CLI for the recorded sessions: `sessions ls` (a page at a time, with why each is held back) and `sessions show`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import ID_MAX, command_group, err, out, print_json, settings_of
from dreamer.cli.records import open_store

if TYPE_CHECKING:
    from sqlmodel import Session as DBSession

    from dreamer.core.models import Cursor, Session
    from dreamer.engine.due import DueRules

sessions_app = command_group("sessions", "List and show recorded sessions.")


@dataclass(frozen=True)
class SessionPage:
    """One page of `sessions ls`: its rows as JSON, how many sessions match in all, and the
    session id to page on from (`--after`), None on the last page."""

    rows: list[dict[str, Any]]
    total: int
    next: int | None

    def as_json(self) -> dict[str, Any]:
        return {"sessions": self.rows, "total": self.total, "next": self.next}


def session_json(s: Session, c: Cursor | None, rules: DueRules, now: datetime) -> dict[str, Any]:
    """A session as listed: its record, its cursor, and what holds it back from a pass (if anything)."""
    from dreamer.engine.due import session_hold

    hold = session_hold(s, c, rules, now) if c is not None else None
    return {
        "id": s.id,
        "external_id": s.external_id,
        "source": s.source,
        "user_id": s.user_id,
        "agent_id": s.agent_id,
        "project": s.project,
        "mode": s.mode,
        "title": s.title,
        "messages": s.message_count,
        "rounds": s.rounds,
        "last_seq": s.last_seq,
        "processed_seq": c.processed_seq if c else 0,
        "cursor_status": c.status if c else None,
        "attempts": c.attempts if c else 0,
        "held_by": hold.by if hold else None,
        "held": hold.reason if hold else None,
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }


@sessions_app.command("ls")
def sessions_ls(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user", metavar="USER"),
    after: int = typer.Option(
        None, "--after", min=1, max=ID_MAX, metavar="ID", help="Continue after this session (the `next` of a page)."
    ),
    limit: int = typer.Option(100, "--limit", min=1, max=ID_MAX, metavar="N", help="Sessions a page."),
    as_json: bool = typer.Option(False, "--json", help="An object: sessions, total and next."),
) -> None:
    """List sessions, newest first, with why each is held back from a pass (the setting that decides it)."""
    from dreamer.core.models import utcnow
    from dreamer.engine.due import DueRules
    from dreamer.store.db import session_scope

    settings = settings_of(ctx)
    with session_scope(open_store(settings)) as s:
        page = _page(s, user, after, limit, DueRules.from_settings(settings), utcnow())
    if as_json:
        print_json(page.as_json())
    else:
        _print_sessions(page.rows)
    if page.next is not None and not as_json:
        err.print(f"showing {len(page.rows)} of {page.total}; next: --after {page.next}", markup=False)


def _page(s: DBSession, user: str | None, after: int | None, limit: int, rules: DueRules, now: datetime) -> SessionPage:
    """Up to `limit` sessions, newest first, from just after session `after`."""
    from sqlalchemy import and_, func, or_
    from sqlmodel import col, select

    from dreamer.core.errors import NotFound
    from dreamer.core.models import Cursor, Session

    q = select(Session, Cursor).join(Cursor, col(Cursor.session_id) == col(Session.id), isouter=True)
    counted = select(func.count()).select_from(Session)
    if user:
        q, counted = q.where(Session.user_id == user), counted.where(Session.user_id == user)
    if after is not None:
        mark = s.get(Session, after)
        if mark is None:
            raise NotFound(f"no session {after} to list after")
        q = q.where(
            or_(
                col(Session.updated_at) < mark.updated_at,
                and_(col(Session.updated_at) == mark.updated_at, col(Session.id) < after),
            )
        )
    found = s.exec(q.order_by(col(Session.updated_at).desc(), col(Session.id).desc()).limit(limit + 1)).all()
    rows = [session_json(a, b, rules, now) for a, b in found[:limit]]
    more = len(found) > limit
    return SessionPage(rows=rows, total=s.exec(counted).one(), next=rows[-1]["id"] if more else None)


def _print_sessions(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    table = Table("id", "user", "source", "external id", "mode", "messages", "processed", "cursor", "held")
    for r in rows:
        table.add_row(
            str(r["id"]),
            r["user_id"],
            r["source"],
            r["external_id"],
            r["mode"],
            str(r["messages"]),
            str(r["processed_seq"]),
            r["cursor_status"] or "-",
            r["held_by"] or "-",
        )
    out.print(table)


@sessions_app.command("show")
def sessions_show(
    ctx: typer.Context,
    session_id: int = typer.Argument(..., min=1, max=ID_MAX, metavar="ID", help="Session id (see `sessions ls`)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one session and its messages."""
    from sqlmodel import col, select

    from dreamer.core.errors import NotFound
    from dreamer.core.models import Cursor, Message, Session, utcnow
    from dreamer.engine.due import DueRules
    from dreamer.store.db import session_scope

    settings = settings_of(ctx)
    with session_scope(open_store(settings)) as s:
        sess = s.get(Session, session_id)
        if sess is None:
            raise NotFound(f"no session {session_id}")
        info = session_json(sess, s.get(Cursor, session_id), DueRules.from_settings(settings), utcnow())
        msgs = s.exec(select(Message).where(Message.session_id == session_id).order_by(col(Message.seq))).all()
        info["messages_list"] = [
            {"seq": m.seq, "role": m.role, "name": m.name, "content": m.content, "created_at": m.created_at.isoformat()}
            for m in msgs
        ]
    if as_json:
        print_json(info)
        return
    _print_session(info)


def _print_session(info: dict[str, Any]) -> None:
    out.print(
        f"session {info['id']} ({info['source']} {info['external_id']}) user {info['user_id']}, "
        f"{info['messages']} messages, processed up to {info['processed_seq']}",
        markup=False,
    )
    if info["held_by"]:
        out.print(f"held by {info['held_by']}: {info['held']}", markup=False)
    for m in info["messages_list"]:
        who = f"{m['role']}:{m['name']}" if m["name"] else m["role"]
        out.print(f"[{m['seq']}] {who}: {m['content'][:500]}", markup=False)
