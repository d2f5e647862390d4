"""Team memory as the online entries call it (HTTP, MCP, CLI): a leader closing a round, a
member reading the team's memory, a temporary team's task ending.

A token bound to a team (`team` in `api_tokens`, `--team` of `dreamer mcp`) reads that team's
memory; only the leader's writer token closes a round (`dreamer.core.teams.round_refusal`), any
other gets `Forbidden` (403, or an MCP tool error)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated

from pydantic import Field, model_validator

from dreamer.core.errors import Forbidden
from dreamer.core.models import Team, utcnow
from dreamer.core.scope import Scope
from dreamer.core.teams import round_refusal, team_scope
from dreamer.engine.markdown import views as markdown
from dreamer.engine.markdown.views import TEAMS_DIR, safe_name, user_dir
from dreamer.engine.runtime import Runtime
from dreamer.engine.team_round import RoundMessage, RoundResult, close_round, message_lines, ref, session_lines
from dreamer.online.recall import RecallResult, recall
from dreamer.online.schemas import GrantId, Strict
from dreamer.store.teams import end_team, get_team

log = logging.getLogger(__name__)

MAX_ROUND_MESSAGES = 2_000


class RoundIn(Strict):
    """A round to close: its messages, or the ids of the team's sessions it ran in (one of them)."""

    messages: Annotated[list[RoundMessage], Field(max_length=MAX_ROUND_MESSAGES)] = []
    session_ids: Annotated[list[GrantId], Field(max_length=100)] = []

    @model_validator(mode="after")
    def _one_source(self) -> RoundIn:
        if bool(self.messages) == bool(self.session_ids):
            raise ValueError("give the round's messages or its session_ids (one of them, not empty)")
        return self


@dataclass(frozen=True)
class Member:
    """Who is asking: the user, agent and team a token is bound to, and whether it may write."""

    user_id: str
    agent_id: str | None
    team: str | None
    can_write: bool = True

    @classmethod
    def of(cls, scope: Scope, can_write: bool) -> Member:
        return cls(scope.user_id, scope.agent_id, scope.team, can_write)


def token_team(rt: Runtime, member: Member) -> Team:
    """The team the token is bound to; `Forbidden` for a token bound to none, `NotFound` when
    the user has no such team."""
    if member.team is None:
        raise Forbidden("this token is bound to no team: set its team to read or write team memory")
    return get_team(rt.engine, member.user_id, member.team)


def close(rt: Runtime, member: Member, body: RoundIn) -> RoundResult:
    """Close a round of the token's team: only its leader's writer token may."""
    team = token_team(rt, member)
    refusal = round_refusal(ref(team), member.user_id, member.agent_id, member.team)
    if refusal is None and not member.can_write:
        refusal = "this token may only read"
    if refusal is not None:
        raise Forbidden(refusal)
    if body.messages:
        return close_round(rt, team, message_lines(body.messages, utcnow(), rt.settings.tz))
    lines, origin = session_lines(rt, team, body.session_ids)
    return close_round(rt, team, lines, origin)


def team_recall(
    rt: Runtime,
    member: Member,
    query: str,
    *,
    k: int | None = None,
    kinds: list[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> RecallResult:
    """The team's memory for `query`, as any member reads it (owned by exactly the team's scope),
    only of `kinds` and said within `since`..`until` when given."""
    team = token_team(rt, member)
    scope = team_scope(team.user_id, team.name)
    return recall(rt, query, scope, k=k, kinds=kinds, since=since, until=until, exact=True)


def end_task(rt: Runtime, team: Team) -> int:
    """End a temporary team's task: nothing of it is left (its row, any memory of its scope, their
    index points and its Markdown file); the memories removed. `Forbidden` for a persistent
    team, whose memory is kept across rounds."""
    if not team.temporary:
        raise Forbidden(f"team {team.name!r} is persistent: its memory is kept (only a temporary team ends)")
    ids = end_team(rt.engine, team)
    if ids:
        rt.index.delete(ids)
    path = user_dir(rt.settings.workspace_dir, team.user_id) / TEAMS_DIR / f"{safe_name(team.name)}.md"
    if path.exists():  # never written by a temporary team's rounds; taking the lock would leave a file
        with markdown.render_lock(path.parent.parent):
            path.unlink(missing_ok=True)
    log.info("team %s of %s ended: %d memories removed", team.name, team.user_id, len(ids))
    return len(ids)
