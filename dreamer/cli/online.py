"""CLI for the online companion: serve, recall, context, flush, trace."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import ID_MAX, app, err, out, print_json, settings_of
from dreamer.cli.records import open_store, prepare

if TYPE_CHECKING:
    from dreamer.engine.runtime import Runtime
    from dreamer.online.trace import Trace
    from workers.scheduler import DreamScheduler

PROJECT = typer.Option(
    None,
    "--project",
    metavar="PROJECT",
    help="Include this project's experience and state (default: the git repository run in, if any).",
)
API_HINT = "while `dreamer serve` runs it owns the embedded index: use its API ({endpoint}) instead"


def recall_depth(k: int | None) -> int | None:
    """`--k`: at most the hits one recall returns (the limit is read only once a command runs)."""
    from dreamer.core.settings import MAX_RECALL_K

    return at_most(k, MAX_RECALL_K)


def context_budget(budget: int | None) -> int | None:
    """`--budget`: at most the largest context block, in tokens."""
    from dreamer.core.settings import MAX_CONTEXT_BUDGET

    return at_most(budget, MAX_CONTEXT_BUDGET)


def at_most(value: int | None, limit: int) -> int | None:
    if value is not None and value > limit:
        raise typer.BadParameter(f"{value} is over {limit}, the most it may be")
    return value


@contextmanager
def index_runtime(ctx: typer.Context, endpoint: str, *, create: bool = False) -> Iterator[Runtime]:
    """A runtime whose index is open; an index owned by a server says to use the API. With
    `create`, a store never made is made (a server on first use), else it is refused."""
    from dreamer.core.errors import IndexInUse
    from dreamer.engine.runtime import Runtime

    settings = settings_of(ctx)
    with Runtime.open(settings, engine=prepare(settings) if create else open_store(settings)) as rt:
        try:
            _ = rt.index  # opens it, or says who owns it
        except IndexInUse as exc:
            raise IndexInUse(f"{exc}; {API_HINT.format(endpoint=endpoint)}") from exc
        yield rt


@app.command()
def serve(
    ctx: typer.Context,
    host: str = typer.Option("127.0.0.1", "--host", metavar="HOST"),
    port: int = typer.Option(8765, "--port", min=1, max=65535, metavar="PORT"),
    insecure_single_user: str = typer.Option(
        None,
        "--insecure-single-user",
        metavar="USER",
        help="Without API tokens: every request acts as a writer for USER (local use only).",
    ),
    scheduler: bool = typer.Option(
        None,
        "--scheduler/--no-scheduler",
        help="Host the dream scheduler in this process (default: on with the embedded index, which one process owns).",
    ),
) -> None:
    """Run the HTTP API (the process owns the embedded index while it runs)."""
    from dreamer.embed.threads import set_embedder_threads
    from dreamer.engine.runtime import settle
    from dreamer.online.api import create_app
    from dreamer.online.auth import insecure_grant, parse_tokens
    from dreamer.online.flush.trigger import validate_flush_settings

    settings = settings_of(ctx)
    validate_flush_settings(settings)
    if not parse_tokens(settings.api_tokens) and not insecure_single_user:
        err.print(
            "error: no API tokens configured: set DREAMER_API_TOKENS, or pass --insecure-single-user USER "
            "for a local single-user server",
            markup=False,
        )
        raise typer.Exit(1)
    if insecure_single_user:
        insecure_grant(insecure_single_user)  # a user id no token could name is refused before anything opens
    set_embedder_threads(settings.serve_torch_threads)
    with index_runtime(ctx, "this server", create=True) as rt:
        api = create_app(rt, insecure_user=insecure_single_user)
        settle(rt)
        if insecure_single_user:
            err.print(f"warning: no authentication, every request acts as {insecure_single_user}", markup=False)
        hosted = _hosted_scheduler(rt) if (scheduler if scheduler is not None else not settings.qdrant_url) else None
        _run_server(rt, api, host, port, hosted)


def _run_server(rt: Runtime, api: Any, host: str, port: int, hosted: DreamScheduler | None) -> None:
    """Serve until stopped, reading a person's Markdown edits back every few seconds meanwhile."""
    import uvicorn

    from dreamer.engine.view_watch import ViewWatcher

    watcher = ViewWatcher(rt, rt.settings.view_poll_seconds).start()
    try:
        uvicorn.run(api, host=host, port=port, log_level="info")
    finally:
        watcher.stop()
        if hosted is not None:
            hosted.shutdown()


def _hosted_scheduler(rt: Runtime) -> DreamScheduler:
    """On the embedded default the server owns the index, so it runs the dream passes too."""
    from workers.scheduler import DreamScheduler, InlineExecutor

    hosted = DreamScheduler(rt, InlineExecutor(rt))
    hosted.start()
    return hosted


@app.command("recall")
def recall_cmd(
    ctx: typer.Context,
    query: str = typer.Argument(..., metavar="QUERY", help="What to look for."),
    user: str = typer.Option(..., "--user", metavar="USER"),
    k: int = typer.Option(
        None, "--k", min=1, callback=recall_depth, metavar="K", help="How many hits (default: recall_k)."
    ),
    include_all: bool = typer.Option(False, "--all", help="Also superseded and forgotten memories."),
    project: str = PROJECT,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Hybrid recall over one user's memories, and the project's experience and state matching it."""
    from dreamer.core.models import utcnow
    from dreamer.core.scope import Scope
    from dreamer.online.code_work.served import with_code_work
    from dreamer.online.recall import past_mark, recall

    now, named = utcnow(), project_or_repository(project)
    with index_runtime(ctx, "POST /v1/recall") as rt:
        found = recall(rt, query, Scope(user_id=user), k=k, include_all=include_all, now=now)
        answer = with_code_work(rt, found.as_json(), user, named, query)
    if as_json:
        print_json(answer)
        return
    out.print(f"recall ({found.mode}) for {query!r}: {len(found.hits)} hit(s)", markup=False)
    if found.note:
        out.print(f"  note: {found.note}", markup=False)
    for h in found.hits:
        past = past_mark(h.valid_until, now, rt.settings.tz)
        out.print(
            f"{h.rank:>3}. {h.score:.3f}  {h.memory_id[:12]}  [{h.kind}, {h.status}]  {h.text}{past}", markup=False
        )
    _print_code_work(answer)


def project_or_repository(project: str | None) -> str | None:
    """`--project`, or the name of the git repository the command runs in (None outside one)."""
    from dreamer.cli.project import repository_name

    if project is not None and not project.strip():
        raise typer.BadParameter("name the project", param_hint="--project")
    return project if project is not None else repository_name()


def _print_code_work(answer: dict[str, Any]) -> None:
    if "project" not in answer:
        return
    work = answer["code_work"]
    out.print(f"code work of {answer['project']}: {len(work)} match(es)", markup=False)
    for w in work:
        rule = "rule" if w["rule"] else "not a rule"
        out.print(f"  {w['id'][:12]}  [{w['kind']}, {w['status']}, {rule}]  {w['text']}", markup=False)
        out.print(f"      {w['label']}", markup=False)


@app.command("context")
def context_cmd(
    ctx: typer.Context,
    user: str = typer.Option(..., "--user", metavar="USER"),
    budget: int = typer.Option(
        None,
        "--budget",
        min=0,
        callback=context_budget,
        metavar="TOKENS",
        help="Token budget (default: context_budget).",
    ),
    project: str = PROJECT,
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """The context block that would be injected for a user (the project's code work after it)."""
    from dreamer.core.scope import Scope
    from dreamer.engine.runtime import Runtime
    from dreamer.online.code_work.served import context_with_work

    settings, named = settings_of(ctx), project_or_repository(project)
    with Runtime.open(settings, engine=open_store(settings)) as rt:
        block = context_with_work(rt, Scope(user_id=user), named, budget)
    if as_json:
        print_json(block)
        return
    if not block["text"]:
        out.print("nothing to inject", markup=False)
        return
    out.print(block["text"], markup=False)
    work = f", {len(block['code_work_ids'])} of {named}'s code work" if named is not None else ""
    out.print(f"({block['tokens']} tokens, {len(block['memory_ids'])} memories{work})", markup=False)


@app.command("flush")
def flush_cmd(
    ctx: typer.Context,
    session: int = typer.Option(
        ..., "--session", min=1, max=ID_MAX, metavar="ID", help="Session id (see `sessions ls`)."
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Flush a session's content since its last flush into daily notes now."""
    from dreamer.online.flush.notes import flush_session

    with index_runtime(ctx, "POST /v1/sessions/<id>/flush") as rt:
        result = flush_session(rt, session)
    if as_json:
        print_json(result.as_json())
        return
    if result.status != "flushed":
        out.print(f"session {session}: {result.status.replace('_', ' ')}", markup=False)
        return
    start, end = result.window or (0, 0)
    out.print(
        f"session {session}: messages {start}-{end} ({result.trigger}, {result.extractor}) -> "
        f"{len(result.notes)} note(s) in {result.path}",
        markup=False,
    )
    for note in result.notes:
        out.print(f"  - {note}", markup=False)


@app.command("trace")
def trace_cmd(
    ctx: typer.Context,
    fact: str = typer.Argument(..., metavar="FACT", help="The fact, as it was said or stored."),
    user: str = typer.Option(..., "--user", metavar="USER"),
    k: int = typer.Option(
        None, "--k", min=1, callback=recall_depth, metavar="K", help="Recall depth (default: recall_k)."
    ),
    budget: int = typer.Option(
        None,
        "--budget",
        min=0,
        callback=context_budget,
        metavar="TOKENS",
        help="Context budget (default: context_budget).",
    ),
    as_json: bool = typer.Option(False, "--json"),
) -> None:
    """Follow a fact: said in a session, stored as a memory, indexed, recalled, injected."""
    from dreamer.online.trace import trace

    with index_runtime(ctx, "POST /v1/recall and GET /v1/context") as rt:
        found = trace(rt, fact, user, k=k, budget=budget)
    if as_json:
        print_json(found.as_json())
        return
    _print_trace(found)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no "


def _print_trace(t: Trace) -> None:
    hops = t.hops
    current = [m for m in t.memories if m.current]
    out.print(f"trace {t.fact!r} for user {t.user_id}", markup=False)
    out.print(f"  said        {_yes(hops['said'])} {len(t.said)} message(s)", markup=False)
    for s in t.said:
        out.print(f"      session {s.session_id} ({s.external_id}) message {s.seq} {s.role}: {s.excerpt}", markup=False)
    out.print(
        f"  remembered  {_yes(hops['remembered'])} {len(current)} current memory(ies), {len(t.memories)} in all",
        markup=False,
    )
    for m in t.memories:
        events = ", ".join(e["event"] for e in m.history)
        out.print(f"      {m.memory_id[:12]} [{m.kind}, {m.status}, source {m.source}] {m.text}", markup=False)
        out.print(
            f"        history: {events or '-'}; indexed_at {m.indexed_at.isoformat() if m.indexed_at else '-'}, "
            f"in index {_yes(m.in_index).strip()}; recall rank {m.recall_rank or '-'}; "
            f"context position {m.context_position or '-'}",
            markup=False,
        )
    for r in t.rejected:
        out.print(f"      rejected by run {r['run_id']}: {r['text']} ({r['reason']})", markup=False)
    for w in t.code_work:
        out.print(f"  code work   {w.subject} {w.id[:12]} {w.project}@{w.branch} [{w.status}] {w.text}", markup=False)
        if w.reason:
            out.print(f"        why: {w.reason}", markup=False)
        steps = ", ".join(f"{e['event']} -> {e['status_after']}" for e in w.history)
        out.print(f"        history: {steps or '-'}", markup=False)
    out.print(f"  indexed     {_yes(hops['indexed'])}", markup=False)
    ranks = [m.recall_rank for m in current if m.recall_rank]
    out.print(
        f"  recalled    {_yes(hops['recalled'])} {'rank ' + str(min(ranks)) if ranks else 'not'} in the top "
        f"{t.recall_k} ({t.recall_mode})",
        markup=False,
    )
    spots = [m.context_position for m in current if m.context_position]
    out.print(
        f"  injected    {_yes(hops['injected'])} {'position ' + str(min(spots)) if spots else 'not'} in the "
        f"context block (budget {t.context_budget} tokens)",
        markup=False,
    )
