"""CLI for the cabinet: memories (ls, show, forget) and reindex."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import ID_MAX, app, command_group, out, print_json, settings_of
from dreamer.cli.records import open_store

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session as DBSession

    from dreamer.core.models import Memory
    from dreamer.engine.runtime import Runtime

memories_app = command_group("memories", "List, show and forget memories.")


def runtime(ctx: typer.Context, engine: Engine | None = None) -> Runtime:
    """The runtime over the configured store (`engine`, if the caller has opened it)."""
    from dreamer.core.private import check_free_space
    from dreamer.engine.runtime import Runtime

    settings = settings_of(ctx)
    check_free_space(settings.data_dir)  # the hard floor: a store or index opened on a full disk dies
    return Runtime.open(settings, engine=engine or open_store(settings))


def memory_json(m: Memory) -> dict[str, Any]:
    return m.model_dump(mode="json")


@memories_app.command("ls")
def memories_ls(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user", metavar="USER"),
    kind: str = typer.Option(None, "--kind", metavar="KIND"),
    status: str = typer.Option(
        None,
        "--status",
        metavar="STATUS",
        help="Default: current (candidate, verified, review_required); 'all' for every status.",
    ),
    limit: int = typer.Option(200, "--limit", min=1, max=ID_MAX, metavar="N"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List memories."""
    from sqlmodel import col, select

    from dreamer.core.models import CURRENT_STATUSES, KINDS, STATUSES, Memory
    from dreamer.store.db import session_scope

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
            q = q.where(col(Memory.status).in_(CURRENT_STATUSES))
        rows = s.exec(q.order_by(col(Memory.user_id), col(Memory.created_at), col(Memory.id)).limit(limit)).all()
    if as_json:
        print_json([memory_json(m) for m in rows])
        return
    print_memories(rows)


def print_memories(rows: Sequence[Memory]) -> None:
    if not rows:
        out.print("no memories", markup=False)
    for m in rows:
        sessions = len({e.get("session_id") for e in m.evidence})
        out.print(f"{m.id[:12]}  {m.user_id}  [{m.kind}, {m.status}, {sessions} session(s)]  {m.text}", markup=False)


def find_memory(s: DBSession, memory_id: str) -> Memory:
    """The memory with this id, or the one whose id starts with it (six characters or more)."""
    from sqlmodel import col, select

    from dreamer.core.errors import NotFound
    from dreamer.core.models import Memory

    m = s.get(Memory, memory_id)
    if m is None and len(memory_id) >= 6:
        matches = s.exec(select(Memory).where(col(Memory.id).startswith(memory_id, autoescape=True)).limit(2)).all()
        if len(matches) > 1:
            raise NotFound(f"{memory_id} starts the ids of several memories: give more of it")
        m = matches[0] if matches else None
    if m is None:
        raise NotFound(f"no memory {memory_id}")
    return m


@memories_app.command("show")
def memories_show(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id, or six or more of its first characters."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show a memory with its evidence and history."""
    from sqlmodel import col, select

    from dreamer.core.models import MemoryEvent
    from dreamer.store.db import session_scope

    engine = open_store(settings_of(ctx))
    with session_scope(engine) as s:
        m = find_memory(s, memory_id)
        events = s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == m.id).order_by(col(MemoryEvent.id))).all()
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
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id, or six or more of its first characters."),
    reason: str = typer.Option(..., "--reason", metavar="TEXT", help="Why (kept in history)."),
) -> None:
    """Forget a memory: it is kept for history, never returned by default (`dreamer forget --memory` erases it)."""
    from dreamer.engine import outbox
    from dreamer.engine.runtime import Runtime
    from dreamer.store import cabinet as cab
    from dreamer.store.db import session_scope

    if not reason.strip():
        raise typer.BadParameter("say why the memory is forgotten", param_hint="--reason")
    settings = settings_of(ctx)
    engine = open_store(settings)
    with Runtime.open(settings, engine=engine) as rt:
        rt.index_ready()
        with session_scope(engine) as s:
            m = cab.forget(s, find_memory(s, memory_id).id, reason=reason)
        outbox.drain(rt, users=[m.user_id])  # indexes the change and renders the user's view
    out.print(f"forgot {m.id}", markup=False)


@app.command()
def reindex(
    ctx: typer.Context, check: bool = typer.Option(False, "--check", help="Report drift, change nothing.")
) -> None:
    """Rebuild the search index from SQL (or, with --check, compare them)."""
    from dreamer.engine import outbox

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
