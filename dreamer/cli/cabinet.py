"""CLI for the cabinet: dream, memories, runs, reindex, demo."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import typer
from rich.table import Table
from sqlmodel import select

from dreamer.cli import ID_MAX, app, err, out, print_json, settings_of
from dreamer.cli.records import open_store, prepare, require_sessions
from dreamer.core.errors import NotFound
from dreamer.core.models import CURRENT_STATUSES, KINDS, STATUSES, DreamRun, Memory, MemoryEvent, Session
from dreamer.engine import outbox
from dreamer.engine.runtime import Runtime
from dreamer.store import cabinet as cab
from dreamer.store.db import session_scope

memories_app = typer.Typer(no_args_is_help=True, help="List, show and forget memories.")
runs_app = typer.Typer(no_args_is_help=True, help="Dream-pass history.")
app.add_typer(memories_app, name="memories")
app.add_typer(runs_app, name="runs")


def runtime(ctx: typer.Context, engine=None) -> Runtime:
    settings = settings_of(ctx)
    return Runtime.open(settings, engine=engine or open_store(settings))


@app.command()
def dream(
    ctx: typer.Context,
    session: list[int] = typer.Option(
        None, "--session", min=1, max=ID_MAX, help="Only these session ids (repeatable)."
    ),
    user: str = typer.Option(None, "--user"),
    force: bool = typer.Option(False, "--force", help="Run even if the agent is busy."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Run one dream pass now (no warm-up)."""
    from dreamer.engine.dream import dream_pass

    engine = open_store(settings_of(ctx))
    require_sessions(engine, session or [], user)
    with runtime(ctx, engine) as rt:
        run = dream_pass(rt, trigger="cli", session_ids=session or None, user_id=user, force=force)
    _print_run(run, as_json)
    if run.failed_sessions:
        err.print(
            f"error: the pass failed on {run.failed_sessions} session(s): see `dreamer checkpoints ls --status failed`",
            markup=False,
        )
        raise typer.Exit(1)


def run_json(r: DreamRun) -> dict:
    return r.model_dump(mode="json")


def _print_run(run: DreamRun, as_json: bool) -> None:
    if as_json:
        print_json(run_json(run))
        return
    out.print(
        f"run {run.id} {run.status} (extractor: {run.extractor}): {run.sessions} session(s), "
        f"{run.messages} message(s), {run.candidates} candidate(s) -> {run.added} added, {run.merged} merged, "
        f"{run.superseded} superseded, {run.rejected} rejected; {run.failed_sessions} failed; "
        f"LLM {run.llm_calls} call(s), {run.prompt_tokens}+{run.completion_tokens} tokens",
        markup=False,
    )
    if run.error:
        out.print(f"  note: {run.error}", markup=False)


def memory_json(m: Memory) -> dict:
    return m.model_dump(mode="json")


@memories_app.command("ls")
def memories_ls(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user"),
    kind: str = typer.Option(None, "--kind"),
    status: str = typer.Option(
        None, "--status", help="Default: current (candidate, verified, review_required); 'all' for every status."
    ),
    limit: int = typer.Option(200, "--limit", min=1, max=ID_MAX),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List memories."""
    if status not in (None, "all", *STATUSES):
        raise typer.BadParameter(f"use all or one of {', '.join(STATUSES)}", param_hint="--status")
    if kind is not None and kind not in KINDS:
        raise typer.BadParameter(f"use one of {', '.join(KINDS)}", param_hint="--kind")
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        q = select(Memory)
        if user:
            q = q.where(Memory.user_id == user)
        if kind:
            q = q.where(Memory.kind == kind)
        if status and status != "all":
            q = q.where(Memory.status == status)
        elif not status:
            q = q.where(Memory.status.in_(CURRENT_STATUSES))
        rows = s.exec(q.order_by(Memory.user_id, Memory.created_at, Memory.id).limit(limit)).all()
    if as_json:
        print_json([memory_json(m) for m in rows])
        return
    print_memories(rows)


def print_memories(rows: list[Memory]) -> None:
    if not rows:
        out.print("no memories", markup=False)
    for m in rows:
        sessions = len({e.get("session_id") for e in m.evidence})
        out.print(f"{m.id[:12]}  {m.user_id}  [{m.kind}, {m.status}, {sessions} session(s)]  {m.text}", markup=False)


def _find(s, memory_id: str) -> Memory:
    """The memory with this id, or the one whose id starts with it (six characters or more)."""
    m = s.get(Memory, memory_id)
    if m is None and len(memory_id) >= 6:
        matches = s.exec(select(Memory).where(Memory.id.startswith(memory_id, autoescape=True)).limit(2)).all()
        if len(matches) > 1:
            raise NotFound(f"{memory_id} starts the ids of several memories: give more of it")
        m = matches[0] if matches else None
    if m is None:
        raise NotFound(f"no memory {memory_id}")
    return m


@memories_app.command("show")
def memories_show(ctx: typer.Context, memory_id: str, as_json: bool = typer.Option(False, "--json")) -> None:
    """Show a memory with its evidence and history."""
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        m = _find(s, memory_id)
        events = s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == m.id).order_by(MemoryEvent.id)).all()
        info = memory_json(m)
        info["history"] = [e.model_dump(mode="json") for e in events]
    if as_json:
        print_json(info)
        return
    out.print(
        f"{info['id']} [{info['kind']}, {info['status']}, source {info['source']}] user {info['user_id']}", markup=False
    )
    out.print(f"  {info['text']}", markup=False)
    for e in info["evidence"]:
        out.print(
            f"  evidence: session {e.get('session_id')} ({e.get('external_id')}) messages {e.get('seqs')}", markup=False
        )
    for e in info["history"]:
        out.print(f"  {e['created_at']} {e['event']}: {e['reason'] or ''} (run {e['run_id']})", markup=False)


@memories_app.command("forget")
def memories_forget(
    ctx: typer.Context,
    memory_id: str,
    reason: str = typer.Option(..., "--reason", help="Why (kept in history)."),
) -> None:
    """Forget a memory: it is kept for history, never returned by default."""
    if not reason.strip():
        raise typer.BadParameter("say why the memory is forgotten", param_hint="--reason")
    settings = settings_of(ctx)
    engine = open_store(settings)
    with Runtime.open(settings, engine=engine) as rt:
        rt.index_ready()
        with session_scope(engine) as s:
            m = cab.forget(s, _find(s, memory_id).id, reason=reason)
        outbox.drain(rt, users=[m.user_id])  # indexes the change and renders the user's view
    out.print(f"forgot {m.id}", markup=False)


@runs_app.command("ls")
def runs_ls(
    ctx: typer.Context,
    limit: int = typer.Option(50, "--limit", min=1, max=ID_MAX),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List dream runs, newest first."""
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        rows = s.exec(select(DreamRun).order_by(DreamRun.id.desc()).limit(limit)).all()
    if as_json:
        print_json([run_json(r) for r in rows])
        return
    table = Table(
        "id", "trigger", "status", "extractor", "started", "sessions", "added", "merged", "superseded", "llm calls"
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
            str(r.llm_calls),
        )
    out.print(table)


@runs_app.command("show")
def runs_show(
    ctx: typer.Context,
    run_id: int = typer.Argument(..., min=1, max=ID_MAX),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show one dream run."""
    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        run = s.get(DreamRun, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    _print_run(run, as_json)
    if not as_json:
        for r in run.rejections:
            out.print(f"  rejected: {r.get('text')} ({r.get('reason')})", markup=False)


@app.command()
def reindex(
    ctx: typer.Context, check: bool = typer.Option(False, "--check", help="Report drift, change nothing.")
) -> None:
    """Rebuild the search index from SQL (or, with --check, compare them)."""
    with runtime(ctx) as rt:
        if check:
            drift = outbox.check(rt)
            out.print(
                f"missing {len(drift.missing)}, extra {len(drift.extra)}, pending {drift.pending}, "
                f"stale {len(drift.stale)}",
                markup=False,
            )
            if not drift.clean:
                raise typer.Exit(1)
            return
        n = outbox.reindex(rt)
    out.print(f"indexed {n} memories", markup=False)


@app.command()
def demo(ctx: typer.Context) -> None:
    """Ingest the bundled example sessions, dream over them, print what was learned."""
    from dreamer.engine.dream import dream_pass
    from dreamer.ingest.store import ingest_file

    settings = settings_of(ctx)
    engine = prepare(settings)
    examples = resources.files("dreamer") / "examples"
    with Runtime.open(settings, engine=engine) as rt:
        rt.index_ready()
        for item in sorted(examples.iterdir(), key=lambda p: p.name):
            if not item.name.endswith(".jsonl"):
                continue
            with resources.as_file(item) as path:
                mode = "code" if item.name.startswith("code") else "agent"
                report = ingest_file(
                    engine,
                    Path(path),
                    fmt="openai",
                    user_id="demo",
                    project="shop-api" if mode == "code" else None,
                    mode=mode,
                    max_message_bytes=settings.max_message_bytes,
                )
                out.print(f"ingested {item.name}: {sum(r.added for r in report.sessions)} new message(s)", markup=False)
        with session_scope(engine) as s:
            ids = [sid for sid in s.exec(select(Session.id).where(Session.user_id == "demo")).all()]
        run = dream_pass(rt, trigger="demo", session_ids=ids, force=True)
        if run.extractor == "rules":
            out.print("extractor: rules (no LLM configured; set DREAMER_LLM_BASE_URL to use a model)", markup=False)
        else:
            out.print(f"extractor: {run.extractor}", markup=False)
        _print_run(run, False)
        with session_scope(engine) as s:
            print_memories(cab.current_memories(s, "demo"))
    out.print(f"Markdown view: {settings.workspace_dir.resolve()}", markup=False)
