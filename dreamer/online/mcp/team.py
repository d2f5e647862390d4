"""The team tools of the MCP server: every member searches the team's memory; the leader closes
a round (a member's call is a tool error: members read team memory, they never write it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from pydantic import Field

from dreamer.core.models import KINDS
from dreamer.core.settings import MAX_RECALL_K
from dreamer.engine.runtime import Runtime
from dreamer.online.auth import Grant
from dreamer.online.mcp.reads import Answer, jsonable
from dreamer.online.teams import Member, RoundIn, close, team_recall

TEAM_WRITE_TOOLS = frozenset({"close_team_round"})
AnyKind = Literal[KINDS]  # type: ignore[valid-type]


class TeamTools:
    """Mixed into `mcp_server.Tools`, which gives the runtime, the caller's grant and `_call`."""

    rt: Runtime

    def _call(self, run: Callable[[], Answer]) -> Answer:
        raise NotImplementedError

    def grant_of(self, ctx: Context) -> Grant:
        raise NotImplementedError

    def _member(self, ctx: Context) -> Member:
        g = self.grant_of(ctx)
        return Member.of(g.scope, g.can_write)

    def search_team_memory(
        self,
        query: Annotated[str, Field(min_length=1, max_length=4000, description="What to look for, in words.")],
        ctx: Context,
        k: Annotated[int | None, Field(ge=1, le=MAX_RECALL_K, description="How many hits; default 5.")] = None,
        kinds: Annotated[
            list[AnyKind] | None, Field(description="Only these kinds: decision, lesson, expertise, context.")
        ] = None,
    ) -> Answer:
        """Search your team's shared memory: its decisions (and why), lessons, who is good at what,
        and the constraints the work keeps to. Read-only; the team's leader writes it when a round
        closes. Returns {"hits": [{"memory_id", "text", "kind", ...}]}, best first."""

        def run() -> Answer:
            wanted = list(kinds) if kinds else None
            return jsonable(team_recall(self.rt, self._member(ctx), query, k=k, kinds=wanted).as_json())

        return self._call(run)

    def close_team_round(
        self,
        ctx: Context,
        messages: Annotated[
            list[dict[str, Any]] | None,
            Field(description="The round's messages: {speaker, text, role?}, in order."),
        ] = None,
        session_ids: Annotated[
            list[str] | None, Field(description="Or the ids of the team's sessions the round ran in.")
        ] = None,
    ) -> Answer:
        """Close a collaboration round (the team's leader only): what it taught is sorted into the
        team's memory as decisions, lessons, expertise and context. A temporary team's round writes
        nothing. Returns {"round", "added", "merged", "superseded", "memory_ids", "note"}."""

        def run() -> Answer:
            body = RoundIn.model_validate({"messages": messages or [], "session_ids": session_ids or []})
            return jsonable(close(self.rt, self._member(ctx), body).as_json())

        return self._call(run)
