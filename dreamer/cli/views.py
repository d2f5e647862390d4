"""CLI for the Markdown views a person edits: `dreamer sync` reads their edits back."""

from __future__ import annotations

import typer

from dreamer.cli import app, err, out, print_json
from dreamer.cli.cabinet import runtime


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
