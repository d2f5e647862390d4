"""CLI for the record: init, ingest, status, and the store the other commands open."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import app, err, out, print_json, settings_of

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import SQLModel

    from dreamer.core.settings import Settings
    from dreamer.ingest.files import FileReport

FORMATS = ("auto", "openai", "claude-code", "openclaw", "locomo")


def open_store(settings: Settings, *, check: bool = True) -> Engine:
    """The engine of the configured store; one never made is refused (`check`): a command that
    only reads creates nothing (those that write call `prepare`)."""
    from dreamer.store import db

    if check:  # a store that was never made is not created by reading it
        db.require_sqlite_file(settings.resolved_database_url())
    engine = db.make_engine(settings.resolved_database_url())
    if check:
        db.require_schema(engine)
    return engine


def require_sessions(engine: Engine, ids: list[int], user: str | None) -> None:
    """Refuse a pass over sessions that are not there: a mistyped id or user is not an empty pass."""
    from sqlmodel import col, select

    from dreamer.core.errors import NotFound
    from dreamer.core.models import Session
    from dreamer.store.db import session_scope

    if not ids and user is None:
        return
    q = select(Session.id)
    if ids:
        q = q.where(col(Session.id).in_(ids))
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


def prepare(settings: Settings) -> Engine:
    """Create the data directory (0700) and the store, or bring its schema to head: what
    `init` does, and each command that writes (`ingest`, `serve`, `run`, `mcp`, `hook`, `demo`)
    on first use. Processes that do it at once take turns (`db.migration_lock`)."""
    from dreamer.core.private import private_dir
    from dreamer.store import db

    private_dir(settings.data_dir)
    private_dir(settings.workspace_dir)
    engine = open_store(settings, check=False)
    db.upgrade(engine)
    return engine


@app.command()
def init(ctx: typer.Context) -> None:
    """Create the data directory and upgrade the database to the newest schema."""
    from dreamer.store import db

    settings = settings_of(ctx)
    engine = prepare(settings)
    out.print(f"data dir {settings.data_dir.resolve()}", markup=False)
    out.print(f"database {db.redact_url(str(engine.url))} at schema {db.current_revision(engine)}", markup=False)


@app.command()
def ingest(
    ctx: typer.Context,
    paths: list[Path] = typer.Argument(..., metavar="PATH...", help="Transcript files."),
    fmt: str = typer.Option("auto", "--format", metavar="FORMAT", help="auto|openai|claude-code|openclaw|locomo"),
    user: str = typer.Option(
        None, "--user", metavar="USER", help="User the sessions belong to (LoCoMo: defaults to sample_id)."
    ),
    agent: str = typer.Option(None, "--agent", metavar="AGENT"),
    project: str = typer.Option(None, "--project", metavar="PROJECT"),
    mode: str = typer.Option(
        None, "--mode", metavar="MODE", help="agent|code (default: code for Claude Code, else agent)"
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Import transcripts; re-importing a file appends only what is new."""
    from dreamer.core.errors import IngestError
    from dreamer.core.private import check_free_space
    from dreamer.ingest.files import plan_file, store_files

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
    check_free_space(settings.data_dir, settings.min_free_mb)  # before anything is written
    reports = store_files(prepare(settings), planned, raw=settings.store_raw_messages)
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


def _report_json(r: FileReport) -> dict[str, Any]:
    return {
        "path": str(r.path),
        "format": r.format,
        "sessions": len(r.sessions),
        "added": sum(x.added for x in r.sessions),
        "skipped": sum(x.skipped for x in r.sessions),
        "rejections": [str(x) for x in r.rejections],
    }


def _print_reports(reports: list[FileReport]) -> None:
    for r in reports:
        j = _report_json(r)
        out.print(
            f"{j['path']}: {j['format']}, {j['sessions']} session(s), {j['added']} message(s) added, "
            f"{j['skipped']} already stored, {len(j['rejections'])} rejected",
            markup=False,
        )
        for line in r.rejection_lines():
            err.print(line, markup=False)


@app.command()
def status(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Data dir, database, schema revision and counts."""
    from dreamer.core.errors import StoreError
    from dreamer.engine.records.revert import held_runs
    from dreamer.engine.schedule import scheduler_status
    from dreamer.store import db

    settings = settings_of(ctx)
    url = settings.resolved_database_url()
    try:
        db.require_sqlite_file(url)  # status reads: a store never made stays unmade
        engine = open_store(settings, check=False)
    except StoreError:
        engine = None
    revision = db.current_revision(engine) if engine is not None else None
    current = engine if revision == db.HEAD else None
    info: dict[str, Any] = {
        "data_dir": str(settings.data_dir.resolve()),
        "database": db.redact_url(url),
        "schema_revision": revision,
        "index": settings.qdrant_url or str(settings.index_dir.resolve()),
        "llm": settings.llm_base_url or "none (rules extractor)",
        **_mode_status(settings, current),
    }
    if current is not None:
        info.update(_counts(current))
        info["held_for_review"] = held_runs(current)
        info.update(scheduler_status(current))
        info.update(_llm_status(settings, current))
    if as_json:
        print_json(info)
        return
    held = info.pop("held_for_review", {})
    for key, value in info.items():
        out.print(f"{key:16} {value}", markup=False)
    for run_id, n in held.items():
        out.print(
            f"held            run {run_id}: {n} change(s) wait for review "
            f"(`dreamer runs show {run_id}`, then `runs accept {run_id}` or `runs revert {run_id}`)",
            markup=False,
        )


def _mode_status(settings: Settings, engine: Engine | None) -> dict[str, Any]:
    """The memory mode and the provider's breaker as the store last kept it: the server's, whatever
    mode this shell's settings name (shown when a provider was ever used, or this mode uses one)."""
    from dreamer.store.provider_breakers import latest

    info: dict[str, Any] = {"memory_mode": settings.memory_mode}
    row = latest(engine) if engine is not None else None
    if row is None:
        if settings.memory_mode in ("external", "both"):
            info["provider"] = settings.memory_provider
            info["provider_breaker"] = "closed (no state change recorded)"
        return info
    last = (row.changes or [{}])[-1]
    why = f": {row.reason}" if row.breaker != "closed" and row.reason else ""
    info["provider"] = row.provider
    info["provider_breaker"] = f"{row.breaker} since {last.get('at', '?')}{why}"
    info["provider_changes"] = len(row.changes or [])
    return info


def _llm_status(settings: Settings, engine: Engine) -> dict[str, Any]:
    """The output mode in use for the configured model, and its window, as learnt."""
    from dreamer.store.endpoints import learnt

    if not settings.llm_base_url:
        return {}
    record = learnt(engine, settings.llm_base_url, settings.llm_model)
    if settings.llm_output_mode != "auto":
        output_mode = f"{settings.llm_output_mode} (forced by DREAMER_LLM_OUTPUT_MODE)"
    else:
        output_mode = record.mode if record and record.mode else "auto (not negotiated yet)"
    window = settings.llm_context_window or (record.context_window if record else None)
    source = "setting" if settings.llm_context_window else (record.window_source if record else None)
    return {"llm_mode": output_mode, "llm_window": f"{window} tokens (from {source})" if window else "unknown"}


def _counts(engine: Engine) -> dict[str, int]:
    from sqlalchemy import func
    from sqlmodel import select

    from dreamer.core.models import Cursor, DreamRun, Memory, Message, Session
    from dreamer.store.db import session_scope

    with session_scope(engine) as s:

        def count(model: type[SQLModel]) -> int:
            return s.exec(select(func.count()).select_from(model)).one()

        return {
            "sessions": count(Session),
            "messages": count(Message),
            "memories": count(Memory),
            "review_required": s.exec(
                select(func.count()).select_from(Memory).where(Memory.status == "review_required")
            ).one(),
            "quarantined": s.exec(select(func.count()).select_from(Cursor).where(Cursor.status == "quarantined")).one(),
            "dream_runs": count(DreamRun),
        }
