"""CLI for experience: `dreamer experience search|add|verify|counterexample|confirm|show|task-end`
and `dreamer eval experience` (memory for code work)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from dreamer.cli import ID_MAX, command_group, err, out, print_json, settings_of
from dreamer.cli.measure import check_json_target, eval_app, write_json
from dreamer.cli.project import BRANCH, PROJECT, USER, book_of, json_arg, rerender, where_of

experience_app = command_group("experience", "Lessons of code work that earn trust, and the checks they suggest.")


def versions_of(pairs: list[str]) -> dict[str, str]:
    out_: dict[str, str] = {}
    for pair in pairs:
        lib, sep, version = pair.partition("=")
        if not sep or not lib.strip() or not version.strip():
            raise typer.BadParameter(f"{pair!r}: use LIBRARY=VERSION (react=18.2)", param_hint="--version")
        out_[lib.strip()] = version.strip()
    return out_


def entry_line(e: Any) -> str:
    return f"{e.id}  [{e.status}, {e.basis}]  {e.text}\n    why: {e.reason}"


@experience_app.command("search")
def experience_search(
    ctx: typer.Context,
    query: str = typer.Argument(..., metavar="QUERY", help="What the task is about (names, error codes welcome)."),
    unit: str = typer.Option(None, "--unit", metavar="UNIT", help="The unit at hand (context, never a filter)."),
    version: list[str] = typer.Option(
        [], "--version", metavar="LIB=VERSION", help="Leave out entries of another major version."
    ),
    status: list[str] = typer.Option([], "--status", metavar="STATUS", help="Only these statuses (repeat)."),
    k: int = typer.Option(
        None, "--k", min=1, max=ID_MAX, metavar="K", help="At most K entries (default: experience_search_k)."
    ),
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Task start: the entries worth checking, each with its status and the conditions to verify."""
    from dreamer.core.code_work.experience import ENTRY_STATUSES
    from dreamer.engine.code_work.search import search

    where = where_of(ctx, user, project, branch)
    limit = min(k or settings_of(ctx).experience_search_k, 100)
    found = search(
        book_of(ctx, write=False),
        where,
        query,
        unit=unit,
        versions=versions_of(version),
        statuses=status or ENTRY_STATUSES,
        limit=limit,
    )
    if as_json:
        print_json(found)
        return
    if not found["checklist"]:
        out.print("no experience fits: nothing to check", markup=False)
    for item in found["checklist"]:
        entry = next(e for e in found["entries"] if e["id"] == item["id"])
        out.print(f"{item['id']}  [{item['status']}] {entry['text']}\n    {item['label']}", markup=False)
        for check in item["checks"]:
            out.print(f"    - {check}", markup=False)


@experience_app.command("add")
def experience_add(
    ctx: typer.Context,
    text: str = typer.Argument(..., metavar="TEXT", help="The lesson."),
    unit: str = typer.Option(None, "--unit", metavar="UNIT"),
    task: str = typer.Option(None, "--task", metavar="TASK"),
    basis: str = typer.Option("inferred", "--basis", metavar="BASIS", help="observed | inferred | confirmed"),
    origin: str = typer.Option("agent", "--origin", metavar="ORIGIN", help="agent | tool | repository | person"),
    condition: list[str] = typer.Option([], "--condition", metavar="TEXT", help="When it applies (repeat)."),
    unverified: list[str] = typer.Option([], "--unverified", metavar="TEXT", help="What is still to verify (repeat)."),
    version: list[str] = typer.Option([], "--version", metavar="LIB=VERSION"),
    depends_on: list[str] = typer.Option([], "--depends-on", metavar="TARGET"),
    keyword: list[str] = typer.Option(
        [], "--keyword", metavar="WORD", help="An exact keyword (a field, an error code)."
    ),
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Record a lesson as a candidate (nothing is verified by being added)."""
    from dreamer.engine.code_work.book import EntryInput

    where = where_of(ctx, user, project, branch)
    given = EntryInput(
        text, unit, task, basis, origin, condition, (), unverified, versions_of(version), depends_on, keyword
    )
    book = book_of(ctx, write=True)
    e = book.add_entry(where, given)
    _done(ctx, book, where, e, as_json)


def _done(ctx: typer.Context, book: Any, where: Any, e: Any, as_json: bool) -> None:
    from dreamer.engine.code_work.search import entry_json

    rerender(ctx, book, where)
    if as_json:
        print_json(entry_json(e, 0, ()))
    else:
        out.print(entry_line(e), markup=False)


def _where_of_entry(ctx: typer.Context, user: str | None, entry_id: str) -> tuple[Any, Any]:
    from dreamer.store import experience as rows
    from dreamer.store.db import session_scope
    from dreamer.store.experience import Where

    book = book_of(ctx, write=True)
    with session_scope(book.engine) as s:
        e = rows.entry(s, user or settings_of(ctx).local_user, entry_id)
    return book, Where(e.user_id, e.project, e.branch)


@experience_app.command("verify")
def experience_verify(
    ctx: typer.Context,
    entry_id: str = typer.Argument(..., metavar="ID"),
    unit: str = typer.Option(..., "--unit", metavar="UNIT", help="The unit it was checked in."),
    result: str = typer.Option("passed", "--result", metavar="RESULT", help="passed | failed"),
    task: str = typer.Option(None, "--task", metavar="TASK"),
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A check of the entry in a unit: two distinct units make it verified."""
    book, where = _where_of_entry(ctx, user, entry_id)
    _done(ctx, book, where, book.verify(where.user_id, entry_id, unit, result, task), as_json)


@experience_app.command("counterexample")
def experience_counterexample(
    ctx: typer.Context,
    entry_id: str = typer.Argument(..., metavar="ID"),
    text: str = typer.Argument(..., metavar="TEXT", help="What happened where it did not hold."),
    unit: str = typer.Option(None, "--unit", metavar="UNIT"),
    task: str = typer.Option(None, "--task", metavar="TASK"),
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A case where the entry did not hold: a verified one goes to review, a candidate narrows."""
    book, where = _where_of_entry(ctx, user, entry_id)
    _done(ctx, book, where, book.counterexample(where.user_id, entry_id, text, unit, task), as_json)


@experience_app.command("confirm")
def experience_confirm(
    ctx: typer.Context,
    entry_id: str = typer.Argument(..., metavar="ID"),
    by: str = typer.Option(..., "--by", metavar="PERSON", help="Who confirms it."),
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """A person vouches for the entry: it is verified."""
    book, where = _where_of_entry(ctx, user, entry_id)
    _done(ctx, book, where, book.confirm(where.user_id, entry_id, by), as_json)


@experience_app.command("show")
def experience_show(
    ctx: typer.Context,
    entry_id: str = typer.Argument(..., metavar="ID", help="An entry or a state field id."),
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The history of an entry or a state field: every change, with its reason."""
    from dreamer.core.errors import NotFound
    from dreamer.store import experience as rows
    from dreamer.store.db import session_scope

    who = user or settings_of(ctx).local_user
    with session_scope(book_of(ctx, write=False).engine) as s:
        events = [ev.model_dump(mode="json") for ev in rows.history(s, who, entry_id)]
    if not events:
        raise NotFound(f"no experience entry or project state {entry_id}")
    if as_json:
        print_json(events)
        return
    for ev in events:
        out.print(
            f"{ev['created_at']}  {ev['event']}: {ev['status_before'] or '-'} -> {ev['status_after']}  {ev['reason'] or ''}",
            markup=False,
        )


@experience_app.command("task-end")
def experience_task_end(
    ctx: typer.Context,
    path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, metavar="PATH", help='JSON: {"findings": [...], "failed_calls": [...]}'
    ),
    task: str = typer.Option(..., "--task", metavar="TASK"),
    unit: str = typer.Option(None, "--unit", metavar="UNIT"),
    project: str = PROJECT,
    branch: str = BRANCH,
    user: str = USER,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Task end: record what the task found and the tool calls that failed, as candidates."""
    from dreamer.engine.code_work.search import entry_json
    from dreamer.engine.code_work.tasks import task_end

    where = where_of(ctx, user, project, branch)
    data = json_arg(path.read_text(encoding="utf-8"), "PATH", {})
    if not isinstance(data, dict):
        raise typer.BadParameter("give an object with findings and failed_calls", param_hint="PATH")
    book = book_of(ctx, write=True)
    added = task_end(
        book, where, task, unit=unit, findings=data.get("findings") or [], failed_calls=data.get("failed_calls") or []
    )
    rerender(ctx, book, where)
    if as_json:
        print_json([entry_json(e, 0, ()) for e in added])
        return
    out.print(f"{len(added)} candidate(s) recorded for task {task}", markup=False)


@eval_app.command("experience")
def eval_experience(
    ctx: typer.Context,
    path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, metavar="PATH", help='A JSON scenario file: {"scenarios": [...]}.'
    ),
    json_out: str = typer.Option(
        None, "--json", metavar="PATH", help="Write the result as JSON to PATH, or '-' for stdout."
    ),
) -> None:
    """Replay code-work scenarios: lifecycle accuracy, retrieval hit@3 and forbidden hits, exact propagation."""
    from dreamer.embed.embedders import build_embedder
    from dreamer.eval.experience import load_scenarios, run_experience

    settings = settings_of(ctx)
    depth = settings.experience_propagation_depth
    check_json_target(json_out)
    embedder = build_embedder(settings)
    if not err.is_terminal:
        result = run_experience(path, depth, embedder=embedder)
    else:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=err, transient=True) as bar:
            task = bar.add_task("scenarios", total=len(load_scenarios(path)))
            step = lambda name: bar.update(task, advance=1, description=name)  # noqa: E731
            result = run_experience(path, depth, step, embedder)
    summary = experience_summary(result)
    (err if json_out == "-" else out).print(summary, markup=False)
    write_json(result, json_out)


def experience_summary(r: dict[str, Any]) -> str:
    ret, prop = r["retrieval"], r["propagation"]
    return (
        f"experience: {r['scenarios']} scenarios, embedder {r['embedder'] or 'none'}; lifecycle accuracy {r['lifecycle_accuracy']} over {r['expects']} expects; "
        f"retrieval hit@3 {ret['hit_at_3']} over {ret['searches']} searches, {ret['forbidden_returned']} forbidden returned; "
        f"propagation exact {prop['exact']} over {prop['changes']} changes; {len(r['misses'])} miss(es)"
        + "".join(f"\n  miss: {json.dumps(m, ensure_ascii=False)}" for m in r["misses"])
    )
