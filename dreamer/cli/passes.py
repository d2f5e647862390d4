"""CLI for dream passes: `dream` (and what it held back, and why), `runs`, `demo`."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import ID_MAX, app, err, out, print_json, settings_of
from dreamer.cli.cabinet import print_memories, runtime
from dreamer.cli.records import open_store, prepare, require_sessions

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from dreamer.core.models import DreamRun
    from dreamer.core.settings import Settings


HELD_LINES = 10  # sessions `dream` names as held back; the rest are counted


@app.command()
def dream(
    ctx: typer.Context,
    session: list[int] = typer.Option(
        None, "--session", min=1, max=ID_MAX, metavar="ID", help="Only these session ids (repeatable)."
    ),
    user: str = typer.Option(None, "--user", metavar="USER", help="Only this user's sessions."),
    force: bool = typer.Option(
        False,
        "--force",
        help="Run even if the agent is busy, and take sessions still waiting to be quiet (short ones too) now.",
    ),
    as_json: bool = typer.Option(False, "--json", help="The run's row as JSON."),
) -> None:
    """Run one dream pass now (no warm-up); then say which sessions with new messages it left, and why."""
    from dreamer.cli.progress import pass_step, progress_bar
    from dreamer.core.private import check_free_space
    from dreamer.engine.dream import dream_pass

    settings = settings_of(ctx)
    check_free_space(settings.data_dir, settings.min_free_mb)  # before the store or index is opened: nothing written
    engine = open_store(settings)
    require_sessions(engine, session or [], user)
    with runtime(ctx, engine) as rt, progress_bar("sessions") as update:
        run = dream_pass(
            rt, trigger="cli", session_ids=session or None, user_id=user, force=force, on_step=pass_step(update)
        )
    print_run(run, as_json)
    if not as_json:
        _print_held(held_lines(settings, engine, session or None, user, forced=force, run=run))
    if run.failed_sessions:
        err.print(
            f"error: the pass failed on {run.failed_sessions} session(s): see `dreamer checkpoints ls --status failed`",
            markup=False,
        )
        raise typer.Exit(1)


def held_lines(
    settings: Settings,
    engine: Engine,
    session_ids: list[int] | None,
    user: str | None,
    *,
    forced: bool = False,
    run: DreamRun | None = None,
) -> list[str]:
    """One line for each session that still has new messages: what holds it back, or why `run`
    (the pass just run) did not take it though it is due."""
    from dreamer.core.models import utcnow
    from dreamer.engine.due import DueRules, held_sessions
    from dreamer.engine.runs import not_taken
    from dreamer.store import leases
    from dreamer.store.db import session_scope

    rules, now = DueRules.from_settings(settings), utcnow()
    with session_scope(engine) as s:
        held = held_sessions(s, rules, now, session_ids=session_ids, user_id=user, forced=forced)
    lines = []
    for sess, hold in held:
        who = f"  session {sess.id} ({sess.external_id}, user {sess.user_id})"
        if hold is not None:
            lines.append(f"{who} held by {hold}")
        else:
            holder = leases.holder(engine, leases.session_lease(sess.id or 0))
            lines.append(f"{who} {not_taken(run, holder, rules.limit, now)}")
    return lines


def _print_held(lines: list[str]) -> None:
    for line in lines[:HELD_LINES]:
        out.print(line, markup=False)
    if len(lines) > HELD_LINES:
        out.print(f"  and {len(lines) - HELD_LINES} more session(s) held: see `dreamer sessions ls`", markup=False)


def run_json(r: DreamRun) -> dict[str, Any]:
    return r.model_dump(mode="json")


def print_run(run: DreamRun, as_json: bool) -> None:
    if as_json:
        print_json(run_json(run))
        return
    out.print(
        f"run {run.id} {run.status} (extractor: {run.extractor}): {run.sessions} session(s), "
        f"{run.messages} message(s), {run.candidates} candidate(s) -> {run.added} added, {run.merged} merged, "
        f"{run.superseded} superseded, {run.held} held for review, {run.rejected} rejected; "
        f"{run.failed_sessions} failed; "
        f"LLM {run.llm_calls} call(s), {bill_text(run.prompt_tokens, run.completion_tokens, run.unbilled_calls)}",
        markup=False,
    )
    if run.error:
        out.print(f"  note: {run.error}", markup=False)


def print_rejections(run: DreamRun) -> None:
    """Each candidate the pass did not store, with why."""
    for r in run.rejections or []:
        where = f"session {r['session_id']}" if r.get("session_id") is not None else "the model's reply"
        out.print(f"  rejected ({where}): {r['text']!r}: {r['reason']}", markup=False)


def bill_text(prompt: int, completion: int, unbilled: int) -> str:
    """A pass's tokens, said to be a floor when calls timed out and the server never told their usage."""
    if not unbilled:
        return f"{prompt}+{completion} tokens"
    return (
        f"at least {prompt}+{completion} tokens ({unbilled} timed-out call(s) never reported their usage: "
        "each is billed its prompt as counted)"
    )


@app.command()
def demo(ctx: typer.Context) -> None:
    """Ingest the bundled example sessions, dream over them, print what was learned; exit 1,
    saying why, when the pass failed (an endpoint that does not answer, say)."""
    from sqlmodel import select

    from dreamer.core.models import Session
    from dreamer.engine.dream import dream_pass
    from dreamer.engine.runs import pass_failure, session_errors
    from dreamer.engine.runtime import Runtime
    from dreamer.store import cabinet as cab
    from dreamer.store.db import session_scope

    settings = settings_of(ctx)
    engine = prepare(settings)
    with Runtime.open(settings, engine=engine) as rt:
        rt.index_ready()
        _ingest_examples(settings, engine)
        with session_scope(engine) as s:
            ids = [sid for sid in s.exec(select(Session.id).where(Session.user_id == "demo")).all() if sid is not None]
        run = dream_pass(rt, trigger="demo", session_ids=ids, force=True)
        if run.extractor == "rules":
            out.print("extractor: rules (no LLM configured; set DREAMER_LLM_BASE_URL to use a model)", markup=False)
        else:
            out.print(f"extractor: {run.extractor}", markup=False)
        print_run(run, False)
        print_rejections(run)
        with session_scope(engine) as s:
            print_memories(cab.current_memories(s, "demo"))
        failed = pass_failure(run, session_errors(rt, ids))
    out.print(f"Markdown view: {settings.workspace_dir.resolve()}", markup=False)
    if failed:
        err.print(f"error: {failed}", markup=False)
        raise typer.Exit(1)


def _ingest_examples(settings: Settings, engine: Engine) -> None:
    """The bundled example sessions, as user `demo` (the `code*` ones as a coding agent's)."""
    from dreamer.ingest.files import ingest_file

    examples = resources.files("dreamer") / "examples"
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
                raw=settings.store_raw_messages,
            )
            out.print(f"ingested {item.name}: {sum(r.added for r in report.sessions)} new message(s)", markup=False)
