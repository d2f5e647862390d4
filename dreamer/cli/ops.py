"""CLI for running it for real: the daemon (`run`), `reprocess` and `checkpoints`."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import ID_MAX, app, command_group, err, out, print_json, settings_of
from dreamer.cli.records import open_store, prepare, require_sessions

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from dreamer.core.models import Cursor, Session
    from dreamer.core.settings import Settings
    from dreamer.engine.records import reprocess as rp

checkpoints_app = command_group("checkpoints", "Session cursors: how far each session was dreamed over.")

CURSOR_STATUSES = ("ok", "failed", "quarantined")


@app.command()
def run(
    ctx: typer.Context,
    executor: str = typer.Option(
        None,
        "--executor",
        metavar="EXECUTOR",
        help="inline: passes run in this process; celery: enqueue the dream_pass task. "
        "Default: DREAMER_SCHEDULER_EXECUTOR (inline).",
    ),
) -> None:
    """Run the scheduler daemon: a pass every interval after a warm-up, backing off while the
    agent is busy. SIGTERM / Ctrl-C finish the session in hand, then exit."""
    from workers.scheduler import run_daemon

    if executor not in (None, "inline", "celery"):
        raise typer.BadParameter("use inline or celery", param_hint="--executor")
    from dreamer.engine.llm_check import check_model_fits

    settings = settings_of(ctx)
    engine = prepare(settings)  # made on first use
    check_model_fits(settings, engine)  # a card the model's window cannot hold: one line, not a failure per pass
    engine.dispose()
    raise typer.Exit(run_daemon(settings, executor=executor))


@app.command()
def reprocess(
    ctx: typer.Context,
    session: list[int] = typer.Option(
        None, "--session", min=1, max=ID_MAX, metavar="ID", help="Session id (repeatable)."
    ),
    user: str = typer.Option(None, "--user", metavar="USER", help="Every session of this user."),
    since: str = typer.Option(None, "--since", metavar="DATE", help="Sessions active since this ISO date (UTC)."),
    quarantined: bool = typer.Option(False, "--quarantined", help="The quarantined sessions."),
    everything: bool = typer.Option(False, "--all", help="Every session."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Say what would be reprocessed and its cost; change nothing."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    via: str = typer.Option(
        "inline", "--via", metavar="VIA", help="inline (here, with a progress bar) or celery (enqueue)."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Reset the selected cursors and dream over those sessions again; memories are merged, never duplicated."""
    from dreamer.engine.records import reprocess as rp
    from dreamer.store.db import session_scope

    if via not in ("inline", "celery"):
        raise typer.BadParameter("use inline or celery", param_hint="--via")
    settings = settings_of(ctx)
    sel = rp.Selection(
        session_ids=tuple(session or ()),
        user_id=user,
        since=rp.parse_since(since) if since else None,
        quarantined=quarantined,
        everything=everything,
    )
    engine = open_store(settings)
    require_sessions(engine, list(sel.session_ids), sel.user_id)
    with session_scope(engine) as s:
        ids = rp.select_ids(s, sel)
        est = rp.estimate(s, ids, settings)
    if dry_run or not ids:
        _print_plan(sel, ids, est, settings.llm_configured, as_json, dry_run=dry_run)
        return
    _confirm(f"Reprocess {len(ids)} session(s) ({est.messages} messages, ~{est.tokens} LLM tokens)?", yes)
    if via == "celery":
        _enqueue(settings, sel, ids, as_json)
        return
    done = _run_inline(settings, engine, ids)
    _print_done(done, as_json)
    if done.failed:
        err.print(f"error: {done.failed} session(s) failed: see `dreamer checkpoints ls --status failed`", markup=False)
        raise typer.Exit(1)


def _confirm(question: str, yes: bool) -> None:
    if yes:
        return
    if not sys.stdin.isatty():
        err.print("error: stdin is not a terminal, so nothing can be confirmed: pass --yes to reprocess", markup=False)
        raise typer.Exit(1)
    if not typer.confirm(question, default=False):
        err.print("nothing reprocessed", markup=False)
        raise typer.Exit(1)


def _plan_json(sel: rp.Selection, ids: list[int], est: rp.Estimate, llm: bool) -> dict[str, Any]:
    return {
        "selection": sel.describe(),
        "session_ids": ids,
        "sessions": est.sessions,
        "messages": est.messages,
        "chunks": est.chunks,
        "message_tokens": est.message_tokens,
        "overhead_tokens": est.overhead_tokens,
        "estimated_tokens": est.tokens if llm else 0,
        "llm": llm,
    }


def _print_plan(
    sel: rp.Selection, ids: list[int], est: rp.Estimate, llm: bool, as_json: bool, *, dry_run: bool
) -> None:
    plan = _plan_json(sel, ids, est, llm)
    plan["dry_run"] = dry_run
    if as_json:
        print_json(plan)
        return
    verb = "would reprocess" if dry_run else "nothing to reprocess:"
    out.print(f"{verb} {sel.describe()}: {est.sessions} session(s), {est.messages} message(s)", markup=False)
    if not ids:
        return
    out.print(f"  session ids: {', '.join(str(i) for i in ids[:50])}{' ...' if len(ids) > 50 else ''}", markup=False)
    cost = (
        f"~{est.tokens} LLM tokens ({est.message_tokens} in messages + {est.overhead_tokens} prompt overhead "
        f"over {est.chunks} chunk(s))"
    )
    out.print(
        f"  estimate: {cost}"
        if llm
        else f"  no LLM configured: the rules extractor spends no tokens ({cost} with one)",
        markup=False,
    )


def _enqueue(settings: Settings, sel: rp.Selection, ids: list[int], as_json: bool) -> None:
    from workers.celery_app import enqueue, make_app

    result = enqueue(make_app(settings), settings, "dreamer.reprocess", args=[sel.to_dict()])
    if as_json:
        print_json({"task_id": result.id, "sessions": len(ids), "queue": settings.celery_queue})
        return
    out.print(
        f"queued reprocessing of {len(ids)} session(s) as task {result.id} on {settings.celery_queue}", markup=False
    )


def _run_inline(settings: Settings, engine: Engine, ids: list[int]) -> rp.Progress:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from dreamer.engine.records import reprocess as rp
    from dreamer.engine.shared_index import open_shared_runtime

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("sessions"),
        TextColumn("{task.fields[messages]} messages, {task.fields[memories]} memories touched"),
        TimeElapsedColumn(),
    )
    with open_shared_runtime(settings, engine=engine) as rt:
        rt.index_ready()  # before the bar shows: an index out of reach is the one line said
        with Progress(*columns, console=err, transient=False) as bar:
            task = bar.add_task("reprocessing", total=len(ids), messages=0, memories=0)

            def step(_session_id: int, done: rp.Progress) -> None:
                bar.update(task, completed=done.sessions, messages=done.messages, memories=done.memories_touched)

            return rp.reprocess(rt, ids, on_session=step)


def _print_done(done: rp.Progress, as_json: bool) -> None:
    if as_json:
        print_json(
            {
                "sessions": done.sessions,
                "messages": done.messages,
                "added": done.added,
                "merged": done.merged,
                "failed": done.failed,
                "runs": done.runs,
            }
        )
        return
    out.print(
        f"reprocessed {done.sessions} session(s), {done.messages} message(s): "
        f"{done.added} memories added, {done.merged} merged, {done.failed} failed",
        markup=False,
    )


@checkpoints_app.command("ls")
def checkpoints_ls(
    ctx: typer.Context,
    status: str = typer.Option(None, "--status", metavar="STATUS", help="ok, failed or quarantined."),
    user: str = typer.Option(None, "--user", metavar="USER"),
    limit: int = typer.Option(200, "--limit", min=1, max=ID_MAX, metavar="N"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Session cursors with their attempts and last errors."""
    from sqlmodel import col, select

    from dreamer.core.models import Cursor, Session
    from dreamer.store.db import session_scope

    if status is not None and status not in CURSOR_STATUSES:
        raise typer.BadParameter(f"use one of {', '.join(CURSOR_STATUSES)}", param_hint="--status")
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        q = select(Cursor, Session).join(Session, col(Session.id) == col(Cursor.session_id))
        if status:
            q = q.where(Cursor.status == status)
        if user:
            q = q.where(Session.user_id == user)
        rows = [_checkpoint_json(c, sess) for c, sess in s.exec(q.order_by(col(Cursor.session_id)).limit(limit))]
    if as_json:
        print_json(rows)
        return
    _print_checkpoints(rows)


def _checkpoint_json(c: Cursor, sess: Session) -> dict[str, Any]:
    return {
        "session_id": c.session_id,
        "user_id": sess.user_id,
        "external_id": sess.external_id,
        "processed_seq": c.processed_seq,
        "last_seq": sess.last_seq,
        "status": c.status,
        "attempts": c.attempts,
        "last_error": c.last_error,
        "updated_at": c.updated_at.isoformat(),
    }


def _print_checkpoints(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    if not rows:
        out.print("no checkpoints", markup=False)
        return
    table = Table("session", "user", "external id", "processed", "status", "attempts", "last error")
    for r in rows:
        table.add_row(
            str(r["session_id"]),
            r["user_id"],
            r["external_id"],
            f"{r['processed_seq']}/{r['last_seq']}",
            r["status"],
            str(r["attempts"]),
            (r["last_error"] or "")[:80],
        )
    out.print(table)
