"""CLI for project state: `dreamer project show|set|check|change` (memory for code work)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import command_group, out, print_json, settings_of

if TYPE_CHECKING:
    from dreamer.engine.code_work.book import CodeBook
    from dreamer.store.experience import Where

project_app = command_group("project", "The state of each unit of a project's work, with its evidence.")

USER_HELP = "Whose records (default: DREAMER_LOCAL_USER)."


def where_of(ctx: typer.Context, user: str | None, project: str, branch: str) -> Where:
    from dreamer.store.experience import Where

    if not project.strip():
        raise typer.BadParameter("name the project", param_hint="--project")
    return Where(user or settings_of(ctx).local_user, project, branch or "main")


def repository_name(folder: Path | None = None) -> str | None:
    """The name of the git repository `folder` (default: the current one) is in: its top folder's
    name; None outside a repository or without git."""
    import subprocess

    try:
        done = subprocess.run(
            ["git", "-C", str(folder or Path.cwd()), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    top = done.stdout.strip()
    return Path(top).name or None if done.returncode == 0 and top else None


def book_of(ctx: typer.Context, *, write: bool) -> CodeBook:
    """The book over the configured store (made on first write; a read never creates it)."""
    from dreamer.cli.records import open_store, prepare
    from dreamer.engine.code_work.book import CodeBook

    settings = settings_of(ctx)
    engine = prepare(settings) if write else open_store(settings)
    return CodeBook(engine, depth=settings.experience_propagation_depth)


def json_arg(value: str | None, hint: str, default: Any) -> Any:
    """A JSON option's value, or one clear error."""
    if value is None:
        return default
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON: {exc.msg} (column {exc.colno})", param_hint=hint) from exc


def rerender(ctx: typer.Context, book: CodeBook, where: Where) -> None:
    """Write the project's Markdown view (`coding/<project>.md`) again, reading a person's edits
    of the user's view back first, as every render does."""
    from dreamer.engine.outbox import render_now
    from dreamer.engine.runtime import Runtime

    with Runtime.open(settings_of(ctx), engine=book.engine) as rt:
        render_now(rt, where.user_id)


def state_json(row: Any) -> dict[str, Any]:
    return {
        "id": row.id,
        "unit": row.unit,
        "field": row.field,
        "value": row.value,
        "status": row.status,
        "reason": row.reason,
        "evidence": row.evidence,
        "depends_on": row.depends_on,
        "updated_at": row.updated_at.isoformat(),
    }


PROJECT = typer.Option(..., "--project", metavar="PROJECT", help="The project (e.g. the repository's name).")
BRANCH = typer.Option("main", "--branch", metavar="BRANCH")
USER = typer.Option(None, "--user", metavar="USER", help=USER_HELP)


@project_app.command("show")
def project_show(
    ctx: typer.Context,
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    unit: str = typer.Option(None, "--unit", metavar="UNIT", help="Only this unit."),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Show each unit's state: field, value, status, why, and evidence."""
    from dreamer.store import experience as rows
    from dreamer.store.db import session_scope

    where = where_of(ctx, user, project, branch)
    with session_scope(book_of(ctx, write=False).engine) as s:
        found = [state_json(r) for r in rows.states(s, where, unit)]
    if as_json:
        print_json({"project": where.project, "branch": where.branch, "states": found})
        return
    if not found:
        out.print(f"no state recorded for {where.project} ({where.branch})", markup=False)
    for st in found:
        out.print(f"{st['id']}  {st['unit']}.{st['field']} = {json.dumps(st['value'])}  [{st['status']}]", markup=False)
        out.print(f"    why: {st['reason']}; evidence: {json.dumps(st['evidence'])}", markup=False)
        if st["depends_on"]:
            out.print(f"    depends on: {', '.join(st['depends_on'])}", markup=False)


@project_app.command("set")
def project_set(
    ctx: typer.Context,
    unit: str = typer.Argument(..., metavar="UNIT", help="The unit of work (a component, a module)."),
    field: str = typer.Argument(..., metavar="FIELD", help="The field, dotted (checks.typecheck)."),
    value: str = typer.Option(None, "--value", metavar="JSON", help="The value, as JSON (a bare word is text)."),
    status: str = typer.Option(
        "in_progress", "--status", metavar="STATUS", help="in_progress | verified | review_required"
    ),
    evidence: str = typer.Option(
        None, "--evidence", metavar="JSON", help='{"command", "result", "commit", "files": {PATH: "sha256:..."}}'
    ),
    depends_on: list[str] = typer.Option(
        [], "--depends-on", metavar="TARGET", help="file:PATH, interface:NAME, unit:NAME or version:LIB (repeat)."
    ),
    by: str = typer.Option(None, "--by", metavar="PERSON", help="A person who vouches for it."),
    workspace: Path = typer.Option(
        None, "--workspace", metavar="PATH", help="Hash the files it names or depends on as they are here now."
    ),
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Set one field of a unit's state; `verified` holds only with a passed check or a person."""
    from dreamer.engine.code_work.book import StateInput

    where = where_of(ctx, user, project, branch)
    parsed = value if value is None else _value(value)
    ev = json_arg(evidence, "--evidence", {})
    if not isinstance(ev, dict):
        raise typer.BadParameter("give an object", param_hint="--evidence")
    if workspace is not None:
        from dreamer.engine.code_work.changes import with_hashes

        ev = with_hashes(ev, depends_on, workspace)
    book = book_of(ctx, write=True)
    row = book.set_state(where, StateInput(unit, field, parsed, status, ev, depends_on, by))
    rerender(ctx, book, where)
    if as_json:
        print_json(state_json(row))
        return
    out.print(f"{row.id}  {row.unit}.{row.field} [{row.status}]: {row.reason}", markup=False)


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


@project_app.command("check")
def project_check(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="PATH", help="The workspace (a git checkout or any folder)."),
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Compare the workspace with the recorded evidence; demote what no longer holds, and say why."""
    from dreamer.engine.code_work.changes import check_workspace

    where = where_of(ctx, user, project, branch)
    book = book_of(ctx, write=False)
    report = check_workspace(book, where, path)
    if report["demoted"]:
        rerender(ctx, book, where)
    if as_json:
        print_json(report)
        return
    head = report["head"][:12] if report["head"] else "not a git repository"
    files, n = report["files_checked"], len(report["demoted"])
    print_demoted(f"checked {files} file(s) at {head}: {n} sent to review", report["demoted"])


@project_app.command("change")
def project_change(
    ctx: typer.Context,
    target: str = typer.Argument(..., metavar="TARGET", help="file:PATH, interface:NAME, unit:NAME or version:LIB"),
    value: str = typer.Option(None, "--value", metavar="VALUE", help="The new version, for version:LIB."),
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Say that something changed: whatever depends on it goes to review, with the reason."""
    from dreamer.engine.code_work.changes import change

    where = where_of(ctx, user, project, branch)
    book = book_of(ctx, write=True)
    demoted = change(book, where, target, value)
    rerender(ctx, book, where)
    if as_json:
        print_json({"target": target, "demoted": [d.json() for d in demoted]})
        return
    print_demoted(f"{target}: {len(demoted)} sent to review", [d.json() for d in demoted])


def print_demoted(head: str, demoted: list[dict[str, str]]) -> None:
    out.print(head, markup=False)
    for d in demoted:
        out.print(f"  {d['subject']} {d['id']}  {d['label']}: {d['reason']}", markup=False)
