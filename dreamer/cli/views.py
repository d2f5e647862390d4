"""CLI for what a person steers: `dreamer sync` reads their Markdown edits back, `dreamer review`
takes their word on what dreaming learnt."""

from __future__ import annotations

import typer

from dreamer.cli import ID_MAX, app, command_group, err, out, print_json, settings_of
from dreamer.cli.cabinet import find_memory, runtime
from dreamer.cli.records import open_store


@app.command()
def sync(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user", metavar="USER", help="Read back this user's view, changed or not."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Read a person's edits of the Markdown files back into the store, then render them again."""
    from dreamer.engine import outbox

    with runtime(ctx) as rt:
        rt.index_ready()
        reports = outbox.sync_views(rt, [user] if user else None, quiet=True)
    if as_json:
        print_json([r.json() for r in reports])
    else:
        for r in reports:
            events = ", ".join(f"{e.event} {e.file}:{e.line}" for e in r.applied) or "no edits"
            out.print(f"{r.user_id}: {events}", markup=False)
            for rel in r.conflicts:
                out.print(
                    f"{r.user_id}: {rel} changed by a person and by a render; the person's version kept", markup=False
                )
        if not reports:
            out.print("no edited views", markup=False)
    problems = [f"{r.user_id}: {p}" for r in reports for p in r.problems]
    for line in problems:
        err.print(f"error: {line} (the file is left as written)", markup=False)
    if problems:
        raise typer.Exit(1)


review_app = command_group("review", "What dreaming learnt that waits for a person's word (DREAMER_REVIEW_MODE).")


def _decided(ctx: typer.Context, memory_id: str, decision: str, text: str | None, as_json: bool) -> None:
    from dreamer.engine import outbox
    from dreamer.engine.records import review
    from dreamer.store.db import session_scope

    with runtime(ctx) as rt:
        rt.index_ready()
        with session_scope(rt.engine) as s:
            memory_id = find_memory(s, memory_id).id
        if decision == "reject":
            done = review.reject(rt.engine, memory_id)
        else:
            done = review.accept(rt.engine, memory_id, text=text)
        outbox.drain(rt, users=[done.user_id])  # indexes the change and renders the user's view
    if as_json:
        print_json(done.json())
        return
    also = "".join(f", replaced {m}" for m in done.replaced) + "".join(f", kept {m}" for m in done.kept)
    out.print(f"{decision.rstrip('e')}ed {done.memory_id}: now {done.status}{also}", markup=False)


@review_app.command("ls")
def review_ls(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user", metavar="USER"),
    limit: int = typer.Option(200, "--limit", min=1, max=ID_MAX, metavar="N"),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """List pending memories and held replacements, oldest first."""
    from dreamer.engine.records import review

    items = review.queue(open_store(settings_of(ctx)), user_id=user, limit=limit)
    if as_json:
        print_json([i.json() for i in items])
        return
    if not items:
        out.print("nothing waits for review", markup=False)
    for i in items:
        what = f"replaces {', '.join(x[:12] for x in i.replaces)}" if i.replaces else ""
        what = f"to be replaced by {i.replaced_by[:12]}" if i.replaced_by else what
        out.print(f"{i.memory_id[:12]}  {i.user_id}  [{i.kind}, {i.status}]  {i.text}  {what}".rstrip(), markup=False)


@review_app.command("accept")
def review_accept(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id, or six or more of its first characters."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Accept a queued memory: it becomes current (and replaces what it was held to replace)."""
    _decided(ctx, memory_id, "accept", None, as_json)


@review_app.command("edit")
def review_edit(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id, or six or more of its first characters."),
    text: str = typer.Option(..., "--text", metavar="TEXT", help="The memory in your words."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Accept a queued memory in your words (it becomes a human record)."""
    _decided(ctx, memory_id, "accept", text, as_json)


@review_app.command("reject")
def review_reject(
    ctx: typer.Context,
    memory_id: str = typer.Argument(..., metavar="ID", help="A memory id, or six or more of its first characters."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Reject a queued memory: it is not used, and the same text is not proposed again."""
    _decided(ctx, memory_id, "reject", None, as_json)
