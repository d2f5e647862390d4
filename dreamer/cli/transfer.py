"""CLI for a store as a whole: `dreamer export` (JSON lines), `dreamer import` (idempotent) and
`dreamer forget` (a user, a session, a message range or a memory, and what came of it: gone)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from dreamer.cli import app, err, out, print_json, settings_of
from dreamer.cli.cabinet import runtime
from dreamer.cli.records import open_store, prepare


@app.command("export")
def export_cmd(
    ctx: typer.Context,
    path: str = typer.Argument("-", metavar="PATH", help="Where to write the JSON lines; '-' for stdout."),
    user: str = typer.Option(None, "--user", metavar="USER", help="Only this user's sessions and memories."),
    sessions: bool = typer.Option(False, "--sessions", help="Also sessions, their messages and daily notes."),
) -> None:
    """Export memories with their history and evidence ids (and, with --sessions, the transcripts) as JSON lines."""
    from dreamer.engine.records.transfer import write_export

    engine = open_store(settings_of(ctx))
    if path == "-":
        counts = write_export(engine, sys.stdout, user_id=user, sessions=sessions)
    else:
        target = Path(path)
        tmp = target.with_name(f".{target.name}.part")
        with tmp.open("w", encoding="utf-8") as fh:  # whole or not at all
            counts = write_export(engine, fh, user_id=user, sessions=sessions)
        tmp.replace(target)
    err.print("exported " + (", ".join(f"{n} {kind}(s)" for kind, n in counts.items()) or "nothing"), markup=False)


@app.command("import")
def import_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="PATH", help="A file `dreamer export` wrote."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Import an export into this store (empty or live); what is already there is left as it is."""
    from dreamer.engine import outbox
    from dreamer.engine.records.transfer import import_records, read_records

    with path.open(encoding="utf-8") as fh:
        records = read_records(fh)
    with runtime(ctx, prepare(settings_of(ctx))) as rt:  # an empty store is made first
        rt.index_ready()
        result = _import(rt.engine, records, import_records)
        outbox.drain(rt, users=sorted(result.users))  # the index and the Markdown follow
    if as_json:
        print_json(result.json())
    added = ", ".join(f"{n} {kind}(s)" for kind, n in result.added.items()) or "nothing"
    present = sum(result.present.values())
    err.print(f"imported {added}; {present} record(s) already there", markup=False)


def _import(engine: Any, records: list[dict[str, Any]], run: Any) -> Any:
    """The import, with a progress bar on stderr when it is a terminal."""
    if not err.is_terminal:
        return run(engine, records)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("records"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task("records", total=len(records))
        return run(engine, records, on_record=lambda: bar.update(task, advance=1))


@app.command("forget")
def forget_cmd(
    ctx: typer.Context,
    user: str = typer.Option(..., "--user", metavar="USER", help="Whose; alone: everything of this user."),
    session: str = typer.Option(
        None, "--session", metavar="ID", help="Only this session and what came from it (its external id)."
    ),
    first: int = typer.Option(None, "--from", min=1, metavar="SEQ", help="With --session: from this message on."),
    last: int = typer.Option(None, "--to", min=1, metavar="SEQ", help="With --session: up to this message."),
    memory: str = typer.Option(
        None, "--memory", metavar="ID", help="Only this memory (its id, or six or more of its first characters)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="List every place that holds the text; change nothing."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Forget a whole user, a session, a range of its messages or a memory, and everything derived
    from it: gone from SQL, the index's files and the Markdown."""
    from dreamer.engine.records.cascade import Selection, forget_derived

    if session is None and (first is not None or last is not None):
        raise typer.BadParameter("--from and --to need --session", param_hint="--from/--to")
    if first is not None and last is not None and first > last:
        raise typer.BadParameter("--from is after --to", param_hint="--from/--to")
    if memory is not None and session is not None:
        raise typer.BadParameter("give --memory or --session, not both", param_hint="--memory")
    if memory is not None and not memory.strip():
        raise typer.BadParameter("name the memory", param_hint="--memory")
    with runtime(ctx) as rt:
        rt.index_ready()
        done = forget_derived(rt, Selection(user, session, first, last, memory), dry_run=dry_run)
    if as_json:
        print_json(done.json())
        return
    verb = "would forget" if dry_run else "forgot"
    out.print(
        f"{verb} {done.selection.describe()}: {len(done.forgotten)} memories forgotten, {len(done.unlinked)} "
        f"kept with less evidence, {done.notes} daily notes, {done.messages} messages, {done.sessions} sessions",
        markup=False,
    )
    for mid in done.forgotten if dry_run else []:
        out.print(f"  forget {mid}", markup=False)
    for mid in done.unlinked if dry_run else []:
        out.print(f"  unlink {mid}", markup=False)
    for place in done.places if dry_run else []:
        out.print(f"  {place.describe()}", markup=False)
