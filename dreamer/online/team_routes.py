"""The HTTP routes of team memory: a leader closes a round, a member reads the team's memory."""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI

from dreamer.engine.runtime import Runtime
from dreamer.online.auth import Auth, Grant
from dreamer.online.schemas import RecallIn
from dreamer.online.teams import Member, RoundIn, close, team_recall, token_team


def team_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """`/v1/team`: the token's team; `/v1/team/rounds`: close a round (its leader only, 403 for a
    member); `/v1/team/recall`: the team's memory, for every member."""

    def member(g: Grant) -> Member:
        return Member.of(g.scope, g.can_write)

    @app.get("/v1/team", tags=["team"])
    def show_team(g: Grant = Depends(auth.grant)) -> dict[str, Any]:
        """The token's team: its leader, whether it is temporary, its rounds, and whether this token leads it."""
        team = token_team(rt, member(g))
        return {
            "name": team.name,
            "leader": team.leader,
            "temporary": team.temporary,
            "rounds": team.rounds,
            "you_lead": g.agent_id == team.leader and g.can_write,
        }

    @app.post("/v1/team/rounds", tags=["team"])
    def close_round(body: RoundIn, g: Grant = Depends(auth.grant)) -> dict[str, Any]:
        """Close a round of the token's team: what it taught goes to the team's memory (nothing for a temporary team)."""
        return close(rt, member(g), body).as_json()

    @app.post("/v1/team/recall", tags=["team"])
    def recall_team(body: RecallIn, g: Grant = Depends(auth.grant)) -> dict[str, Any]:
        """Search the memory of the token's team (read-only to every member), only of `kinds` when given."""
        found = team_recall(rt, member(g), body.query, k=body.k, kinds=body.kinds, since=body.since, until=body.until)
        return found.as_json()
