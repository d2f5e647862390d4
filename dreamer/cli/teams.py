"""`dreamer team`: create a team, close a round as its leader, list and show teams, end a
temporary team's task."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from dreamer.cli import command_group, out, print_json, settings_of
from dreamer.cli.cabinet import runtime
from dreamer.cli.records import open_store

if TYPE_CHECKING:
    from dreamer.core.models import Team
    from dreamer.engine.runtime import Runtime

T = TypeVar("T")

team_app = command_group("team", "Teams of agents: the leader writes the team's memory at the end of each round.")

USER = typer.Option(..., "--user", metavar="USER", help="The user the team belongs to.")


def team_json(t: Team) -> dict[str, Any]:
    return {"user_id": t.user_id, "name": t.name, "leader": t.leader, "temporary": t.temporary, "rounds": t.rounds}


def team_line(t: Team) -> str:
    kind = "temporary (reads, never writes)" if t.temporary else "persistent"
    return f"{t.user_id}/{t.name}: leader {t.leader}, {kind}, {t.rounds} round(s) closed"


@team_app.command("create")
def create(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The team's name (its members' tokens name it)."),
    user: str = USER,
    leader: str = typer.Option(..., "--leader", metavar="AGENT", help="The agent who closes rounds."),
    temporary: bool = typer.Option(False, "--temporary", help="Read only: its rounds write nothing."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Create a team; says whether it is temporary."""
    from dreamer.core.errors import ConfigError
    from dreamer.ingest.base import identifier_problem
    from dreamer.store.teams import create_team

    for what, value in (("team", name), ("user", user), ("leader", leader)):
        if not value.strip() or (problem := identifier_problem(value)):
            raise ConfigError(f"{what} {value!r}: {problem or 'empty'}")
    t = create_team(open_store(settings_of(ctx)), user, name, leader, temporary=temporary)
    if as_json:
        print_json(team_json(t))
        return
    out.print(f"created team {team_line(t)}", markup=False)


@team_app.command("close-round")
def close_round(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The team."),
    user: str = USER,
    messages: Path = typer.Option(
        None, "--messages", metavar="PATH", help="JSONL of the round's messages: {speaker, text, role?}."
    ),
    sessions: list[str] = typer.Option(None, "--session", metavar="ID", help="A team session of the round (repeat)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Close a round as the team's leader: what it taught goes to the team's memory."""
    from dreamer.online.teams import Member, RoundIn, close

    body = RoundIn(messages=_round_messages(messages) if messages else [], session_ids=sessions or [])
    result = _with_team(ctx, user, name, lambda rt, t: close(rt, Member(user, t.leader, t.name), body))
    if as_json:
        print_json(result.as_json())
        return
    if not result.written:
        out.print(f"team {name}: {result.note}", markup=False)
        return
    counts = f"{result.added} added, {result.merged} merged, {result.superseded} superseded, {result.rejected} rejected"
    out.print(f"team {name} round {result.round} closed (run {result.run_id}): {counts}", markup=False)


def _with_team(ctx: typer.Context, user: str, name: str, act: Callable[[Runtime, Team], T]) -> T:
    """`act` on the runtime and the team `name` of `user` (`NotFound` when there is none)."""
    from dreamer.store.teams import get_team

    rt = runtime(ctx)
    try:
        return act(rt, get_team(rt.engine, user, name))
    finally:
        rt.close()


def _round_messages(path: Path) -> list[Any]:
    """The messages of a JSONL file; `IngestError` (one line) for a line that is not one."""
    from pydantic import ValidationError

    from dreamer.core.errors import IngestError, validation_summary
    from dreamer.engine.team_round import RoundMessage

    found = []
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            found.append(RoundMessage.model_validate(json.loads(raw)))
        except json.JSONDecodeError as exc:
            raise IngestError(f"{path.name} line {n}: not JSON ({exc.msg})") from None
        except ValidationError as exc:
            raise IngestError(f"{path.name} line {n}: {validation_summary(exc)}") from None
    if not found:
        raise IngestError(f"{path.name}: no messages")
    return found


@team_app.command("ls")
def list_teams(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user", metavar="USER", help="Only this user's teams."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """List the teams."""
    from dreamer.store.teams import list_teams as listed

    teams = listed(open_store(settings_of(ctx)), user)
    if as_json:
        print_json([team_json(t) for t in teams])
        return
    for t in teams:
        out.print(team_line(t), markup=False)
    if not teams:
        out.print("no teams", markup=False)


@team_app.command("show")
def show(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The team."),
    user: str = USER,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """A team and its current memory, by tag."""
    from dreamer.core.models import CURRENT_STATUSES, TEAM_KINDS
    from dreamer.core.teams import team_scope
    from dreamer.store import cabinet
    from dreamer.store.db import session_scope
    from dreamer.store.teams import get_team

    engine = open_store(settings_of(ctx))
    t = get_team(engine, user, name)
    scope = team_scope(user, name)
    with session_scope(engine) as s:
        rows = [m for m in cabinet.current_memories(s, user) if scope.owns(m) and m.status in CURRENT_STATUSES]
    memories = [{"memory_id": m.id, "kind": m.kind, "text": m.text} for m in rows]
    if as_json:
        print_json({**team_json(t), "memories": memories})
        return
    out.print(team_line(t), markup=False)
    for kind in TEAM_KINDS:
        for m in (m for m in memories if m["kind"] == kind):
            out.print(f"  [{kind}] {m['text']} ({m['memory_id']})", markup=False)


@team_app.command("end")
def end(
    ctx: typer.Context,
    name: str = typer.Argument(..., metavar="NAME", help="The temporary team."),
    user: str = USER,
) -> None:
    """End a temporary team's task: nothing of it is left (row, index points, files)."""
    from dreamer.online.teams import end_task

    removed = _with_team(ctx, user, name, end_task)
    out.print(f"team {name} ended: nothing of it is left ({removed} memories removed)", markup=False)
