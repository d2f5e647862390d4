"""CLI for the record: init, ingest, sessions, status."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table
from sqlalchemy import func
from sqlmodel import select

from dreamer.cli import ID_MAX, app, err, out, print_json, settings_of
from dreamer.core.errors import IngestError, NotFound, StoreError
from dreamer.core.models import Cursor, DreamRun, Memory, Message, Session
from dreamer.core.settings import Settings
from dreamer.engine.schedule import scheduler_status
from dreamer.store import db
from dreamer.store.db import session_scope

sessions_app = typer.Typer(no_args_is_help=True, help="List and show recorded sessions.")
app.add_typer(sessions_app, name="sessions")

FORMATS = ("auto", "openai", "claude-code", "openclaw", "locomo")


def open_store(settings: Settings, *, check: bool = True):
    if check:  # a store that was never made is not created by reading it
        db.require_sqlite_file(settings.resolved_database_url())
    engine = db.make_engine(settings.resolved_database_url())
    if check:
        db.require_schema(engine)
    return engine


def require_sessions(engine, ids: list[int], user: str | None) -> None:
    """Refuse a pass over sessions that are not there: a mistyped id or user is not an empty pass."""
    if not ids and user is None:
        return
    q = select(Session.id)
    if ids:
        q = q.where(Session.id.in_(ids))
    if user is not None:
        q = q.where(Session.user_id == user)
    with session_scope(engine) as s:
        found = set(s.exec(q).all())
    missing = sorted(set(ids) - found)
    if missing:
        owner = f" of user {user}" if user is not None else ""
        raise NotFound(f"no session {', '.join(map(str, missing))}{owner}")
    if not found:
        raise NotFound(f"no sessions of user {user}")


def prepare(settings: Settings):
    """Create the data directory and bring the schema to head."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    settings.workspace_dir.mkdir(parents=True, exist_ok=True)
    engine = open_store(settings, check=False)
    db.upgrade(engine)
    return engine


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the data directory and upgrade the database to the newest schema."""
    settings = settings_of(ctx)
    engine = prepare(settings)
    out.print(f"data dir {settings.data_dir.resolve()}", markup=False)
    out.print(f"database {db.redact_url(str(engine.url))} at schema {db.current_revision(engine)}", markup=False)


@app.command()
def ingest(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(..., help="Transcript files."),
    fmt: str = typer.Option("auto", "--format", help="auto|openai|claude-code|openclaw|locomo"),
    user: str = typer.Option(None, "--user", help="User the sessions belong to (LoCoMo: defaults to sample_id)."),
    agent: str = typer.Option(None, "--agent"),
    project: str = typer.Option(None, "--project"),
    mode: str = typer.Option(None, "--mode", help="agent|code (default: code for Claude Code, else agent)"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Import transcripts; re-importing a file appends only what is new."""
    from dreamer.ingest.store import plan_file, store_files

    if fmt not in FORMATS:
        raise IngestError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if mode not in (None, "agent", "code"):
        raise IngestError(f"unknown mode {mode!r}; choose agent or code")
    settings = settings_of(ctx)
    planned = [  # every file read, parsed and its owners resolved before anything is written
        plan_file(
            p,
            fmt=fmt,
            user_id=user,
            agent_id=agent,
            project=project,
            mode=mode,
            max_message_bytes=settings.max_message_bytes,
        )
        for p in paths
    ]
    reports = store_files(prepare(settings), planned)
    rejected = sum(len(r.rejections) for r in reports)
    if as_json:
        print_json([_report_json(r) for r in reports])
    else:
        _print_reports(reports)
    empty = [r for r in reports if not r.sessions and not r.rejections]
    for r in empty:
        err.print(f"{r.path}: no session found as {r.format}", markup=False)
    if rejected or empty:
        raise typer.Exit(1)


def _report_json(r) -> dict:
    return {
        "path": str(r.path),
        "format": r.format,
        "sessions": len(r.sessions),
        "added": sum(x.added for x in r.sessions),
        "skipped": sum(x.skipped for x in r.sessions),
        "rejections": [str(x) for x in r.rejections],
    }


def _print_reports(reports) -> None:
    for r in reports:
        j = _report_json(r)
        out.print(
            f"{j['path']}: {j['format']}, {j['sessions']} session(s), {j['added']} message(s) added, "
            f"{j['skipped']} already stored, {len(j['rejections'])} rejected",
            markup=False,
        )
        for line in r.rejection_lines():
            err.print(line, markup=False)


def _session_json(s: Session, c: Cursor | None) -> dict:
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
        "created_at": s.created_at.isoformat(),
        "updated_at": s.updated_at.isoformat(),
    }


@sessions_app.command("ls")
def sessions_ls(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user"),
    limit: int = typer.Option(100, "--limit", min=1, max=ID_MAX),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List sessions, newest first."""
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        q = select(Session, Cursor).join(Cursor, Cursor.session_id == Session.id, isouter=True)
        if user:
            q = q.where(Session.user_id == user)
        rows = [
            _session_json(a, b)
            for a, b in s.exec(q.order_by(Session.updated_at.desc(), Session.id.desc()).limit(limit))
        ]
    if as_json:
        print_json(rows)
        return
    table = Table("id", "user", "source", "external id", "mode", "messages", "processed", "cursor")
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
        )
    out.print(table)


@sessions_app.command("show")
def sessions_show(
    ctx: typer.Context,
    session_id: int = typer.Argument(..., min=1, max=ID_MAX, help="Session id (see `sessions ls`)."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one session and its messages."""
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        sess = s.get(Session, session_id)
        if sess is None:
            raise NotFound(f"no session {session_id}")
        info = _session_json(sess, s.get(Cursor, session_id))
        msgs = s.exec(select(Message).where(Message.session_id == session_id).order_by(Message.seq)).all()
        info["messages_list"] = [
            {"seq": m.seq, "role": m.role, "name": m.name, "content": m.content, "created_at": m.created_at.isoformat()}
            for m in msgs
        ]
    if as_json:
        print_json(info)
        return
    out.print(
        f"session {info['id']} ({info['source']} {info['external_id']}) user {info['user_id']}, "
        f"{info['messages']} messages, processed up to {info['processed_seq']}",
        markup=False,
    )
    for m in info["messages_list"]:
        who = f"{m['role']}:{m['name']}" if m["name"] else m["role"]
        out.print(f"[{m['seq']}] {who}: {m['content'][:500]}", markup=False)


@app.command()
def status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Data dir, database, schema revision and counts."""
    settings = settings_of(ctx)
    url = settings.resolved_database_url()
    try:
        db.require_sqlite_file(url)  # status reads: a store never made stays unmade
        engine = open_store(settings, check=False)
    except StoreError:
        engine = None
    info = {
        "data_dir": str(settings.data_dir.resolve()),
        "database": db.redact_url(url),
        "schema_revision": db.current_revision(engine) if engine is not None else None,
        "index": settings.qdrant_url or str(settings.index_dir.resolve()),
        "llm": settings.llm_base_url or "none (rules extractor)",
    }
    if info["schema_revision"] == db.HEAD:
        info.update(_counts(engine))
        info.update(scheduler_status(engine))
    if as_json:
        print_json(info)
        return
    for key, value in info.items():
        out.print(f"{key:16} {value}", markup=False)


def _counts(engine) -> dict:
    with session_scope(engine) as s:
        count = lambda model: s.exec(select(func.count()).select_from(model)).one()  # noqa: E731
        return {
            "sessions": count(Session),
            "messages": count(Message),
            "memories": count(Memory),
            "quarantined": s.exec(select(func.count()).select_from(Cursor).where(Cursor.status == "quarantined")).one(),
            "dream_runs": count(DreamRun),
        }
