"""CLI for a run as a changeset: `runs revert` and `runs accept` (and the changes `runs show` lists)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import ID_MAX, command_group, err, out, print_json, settings_of
from dreamer.cli.passes import print_run, run_json
from dreamer.cli.records import open_store

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from dreamer.core.changeset import Conflict
    from dreamer.core.models import DreamRun
    from dreamer.engine.records.revert import Accepted, Reverted, RunChange


runs_app = command_group("runs", "Dream-pass history.")


@runs_app.command("ls")
def runs_ls(
    ctx: typer.Context,
    limit: int = typer.Option(50, "--limit", min=1, max=ID_MAX, metavar="N"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List dream runs, newest first."""
    from sqlmodel import col, select

    from dreamer.core.models import DreamRun
    from dreamer.store.db import session_scope

    with session_scope(open_store(settings_of(ctx))) as s:
        rows = s.exec(select(DreamRun).order_by(col(DreamRun.id).desc()).limit(limit)).all()
    if as_json:
        print_json([run_json(r) for r in rows])
        return
    _print_runs(list(rows))


def _print_runs(rows: list[DreamRun]) -> None:
    from rich.table import Table

    table = Table(
        "id",
        "trigger",
        "status",
        "extractor",
        "started",
        "sessions",
        "added",
        "merged",
        "superseded",
        "held",
        "llm calls",
    )
    for r in rows:
        table.add_row(
            str(r.id),
            r.trigger,
            r.status,
            r.extractor,
            r.started_at.isoformat(timespec="seconds"),
            str(r.sessions),
            str(r.added),
            str(r.merged),
            str(r.superseded),
            str(r.held),
            str(r.llm_calls),
        )
    out.print(table)


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., min=1, max=ID_MAX, metavar="ID"),
    user: str = typer.Option(None, "--user", metavar="USER", help="Only the changes of this user's memories."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one dream run: its figures and its changes, per user."""
    from dreamer.engine.records.revert import require_run, run_changes
    from dreamer.store.db import session_scope

    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        run = require_run(s, run_id)
    changes = run_changes(engine, run_id, user_id=user)
    if as_json:
        print_json({**run_json(run), "changes": [change_json(c) for c in changes]})
        return
    print_run(run, as_json)
    for r in run.rejections:
        out.print(f"  rejected: {r.get('text')} ({r.get('reason')})", markup=False)
    print_changes(changes)


def change_json(c: RunChange) -> dict[str, Any]:
    return {
        "event_id": c.change.id,
        "event": c.change.event,
        "memory_id": c.change.memory_id,
        "user_id": c.user_id,
        "text": c.text,
        "status": c.status,
        "reason": c.change.reason,
        "data": dict(c.change.data),
        "reverted": c.undone,
    }


def change_line(c: RunChange) -> str:
    """``  <event> <memory id> <text> (<what it did>)``, and whether it was reverted since."""
    data = c.change.data
    what = {
        "merge": lambda: f"+{len(data.get('added', data.get('evidence', [])))} evidence, status {_arrow(data)}",
        "supersede": lambda: f"superseded by {data.get('by')}",
        "hold": lambda: f"held for review: would be {data.get('action', 'supersede')}d by {data.get('by')}",
        "forget": lambda: f"status {_arrow(data)}",
        "add": lambda: f"added: {c.change.reason or 'new'}",
    }.get(c.change.event, lambda: c.change.reason or "")()
    tail = " [reverted]" if c.undone else ""
    return f"  {c.change.event:9} {c.change.memory_id} {c.text} ({what}){tail}"


def _arrow(data: Any) -> str:
    status = data.get("status") or ["?", "?"]
    return f"{status[0]} -> {status[-1]}"


def print_changes(changes: list[RunChange]) -> None:
    """The run's changes, per user."""
    if not changes:
        out.print("  no changes", markup=False)
    for user in sorted({c.user_id for c in changes}):
        out.print(f"changes of user {user}:", markup=False)
        for c in changes:
            if c.user_id == user:
                out.print(change_line(c), markup=False)


def _conflict_line(c: Conflict) -> str:
    by = f"run {c.run_id}" if c.run_id is not None else "a person or an agent (no run)"
    return f"  memory {c.memory_id}: {c.event} by {by} (event {c.event_id})"


def _sessions(changes: list[RunChange]) -> list[int]:
    """The sessions whose messages the changes rest on."""
    return sorted(
        {int(e["session_id"]) for c in changes for e in c.change.data.get("evidence", []) if e.get("session_id")}
    )


def known_run(engine: Engine, run_id: int) -> None:
    """Refuse a run id that is not there (one line), before anything is opened or written."""
    from dreamer.engine.records.revert import require_run
    from dreamer.store.db import session_scope

    with session_scope(engine) as s:
        require_run(s, run_id, finished=True)


@runs_app.command("revert")
def runs_revert(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., min=1, max=ID_MAX, metavar="ID"),
    user: str = typer.Option(None, "--user", metavar="USER", help="Only this user's memories."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be reverted; change nothing."),
    force: bool = typer.Option(False, "--force", help="Revert even where a later change touched the same memories."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Undo a run: restore what it superseded, forgot or held, take out the evidence it merged
    in, retire what it added; as new history events. The sessions' cursors stay."""
    from dreamer.engine import outbox
    from dreamer.engine.records.revert import revert_run
    from dreamer.engine.runtime import Runtime

    settings = settings_of(ctx)
    engine = open_store(settings)
    known_run(engine, run_id)
    if dry_run:
        result = revert_run(engine, run_id, user_id=user, dry_run=True)
    else:
        with Runtime.open(settings, engine=engine) as rt:
            rt.index_ready()  # an index another process holds refuses before anything is written
            result = revert_run(engine, run_id, user_id=user, force=force)
            if result.applied:
                outbox.drain(rt, users=result.users)  # indexes the changes and renders the users' views
    _report_revert(result, user, dry_run, as_json)
    if (result.conflicts or result.unsupported) and not (force or dry_run):
        err.print(f"error: run {run_id} not reverted: later changes touch its memories (--force reverts anyway)")
        raise typer.Exit(1)


def _report_revert(r: Reverted, user: str | None, dry_run: bool, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "run_id": r.run_id,
                "applied": r.applied,
                "dry_run": dry_run,
                "already_reverted": r.already,
                "changes": [change_json(c) for c in r.undone],
                "conflicts": [vars(c) for c in r.conflicts],
                "unsupported": [{"event_id": c.id, "event": c.event, "memory_id": c.memory_id} for c in r.unsupported],
                "sessions": _sessions(r.undone),
            }
        )
        return
    if not r.undone:
        whose = f" of user {user}" if user is not None else ""
        if r.already:
            out.print(
                f"nothing to revert: the {r.already} change(s) of run {r.run_id} were reverted before", markup=False
            )
        else:
            out.print(f"nothing to revert: run {r.run_id} changed no memory{whose}", markup=False)
        return
    verb = "reverted" if r.applied else "would revert"
    out.print(f"{verb} {len(r.undone)} change(s) of run {r.run_id}:", markup=False)
    print_changes(r.undone)
    if r.conflicts:
        out.print("later changes to the same memories:", markup=False)
        for c in r.conflicts:
            out.print(_conflict_line(c), markup=False)
    for u in r.unsupported:
        out.print(f"  memory {u.memory_id}: its {u.event} (event {u.id}) cannot be undone", markup=False)
    sessions = _sessions(r.undone)
    if r.applied and sessions:
        again = " ".join(f"--session {s}" for s in sessions)
        out.print(f"the sessions' cursors stay: `dreamer reprocess {again}` dreams them again", markup=False)


@runs_app.command("accept")
def runs_accept(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., min=1, max=ID_MAX, metavar="ID"),
    user: str = typer.Option(None, "--user", metavar="USER", help="Only this user's memories."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Apply the supersessions the guard held in a run for review (`runs revert` drops them)."""
    from dreamer.engine import outbox
    from dreamer.engine.records.revert import accept_run
    from dreamer.engine.runtime import Runtime

    settings = settings_of(ctx)
    engine = open_store(settings)
    known_run(engine, run_id)
    with Runtime.open(settings, engine=engine) as rt:
        rt.index_ready()
        result = accept_run(engine, run_id, user_id=user)
        if result.applied:
            outbox.drain(rt, users=result.users)
    _report_accept(result, as_json)


def _report_accept(r: Accepted, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "run_id": r.run_id,
                "applied": [change_json(c) for c in r.applied],
                "skipped": [{**change_json(c), "why": why} for c, why in r.skipped],
            }
        )
        return
    if not (r.applied or r.skipped):
        out.print(f"nothing to accept: run {r.run_id} holds no change for review", markup=False)
        return
    out.print(f"accepted {len(r.applied)} held change(s) of run {r.run_id}", markup=False)
    print_changes(r.applied)
    for c, why in r.skipped:
        out.print(f"  left {c.change.memory_id}: {why}", markup=False)
