"""Team memory, as policy (pure): whose scope a team's memory lives in, who may write it, and
what a member reads.

A team belongs to one user; its members are that user's agents, each holding a token bound to
the team. The team's memory is owned by exactly ``Scope(user, team=name)`` (no agent, no
project), so the team name is part of every key and filter, and a member's own memories
(``Scope(user, agent, team)``) stay the member's. Only the leader writes the team's memory,
and only when the team is not temporary."""

from __future__ import annotations

from dataclasses import dataclass

from dreamer.core.models import TEAM_KINDS
from dreamer.core.scope import Owned, Scope

TEAM_SOURCE = "team"  # the `source` of a memory a round wrote


@dataclass(frozen=True)
class TeamRef:
    """What the policy reads of a team row."""

    user_id: str
    name: str
    leader: str
    temporary: bool


def team_scope(user_id: str, team: str) -> Scope:
    """The scope a team's memory is owned by, exactly: the user's, the team's, no agent, no project."""
    return Scope(user_id=user_id, team=team)


def is_team_memory(row: Owned, user_id: str, team: str) -> bool:
    """Whether `row` is the memory of `team` of `user_id` (owned by exactly its scope)."""
    return team_scope(user_id, team).owns(row)


def round_refusal(team: TeamRef, user_id: str, agent_id: str | None, team_of_token: str | None) -> str | None:
    """Why a token of (`user_id`, `agent_id`, `team_of_token`) may not close a round of `team`,
    or None when it may: only the leader's token, bound to the team, writes its memory."""
    if user_id != team.user_id or team_of_token != team.name:
        return f"this token is not bound to team {team.name!r}"
    if agent_id != team.leader:
        return f"only the leader ({team.leader}) writes the memory of team {team.name!r}; members read it"
    return None


def writes(team: TeamRef) -> bool:
    """Whether closing a round of `team` writes memory: never for a temporary team."""
    return not team.temporary


def team_kind(kind: str) -> bool:
    """Whether `kind` is one of the four tags a round is sorted into."""
    return kind in TEAM_KINDS
