"""The MCP tools of the review queue (`review_queue`, `review_memory`), mixed into
`dreamer.online.mcp.server.Tools`: the same calls as the `/v1/review` routes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from dreamer.core.scope import Scope
from dreamer.engine.runtime import Runtime
from dreamer.online.review_calls import Decision, ReviewIn, decide, queued

Answer = dict[str, Any]
REVIEW_WRITE_TOOLS = frozenset({"review_memory"})


class ReviewTools:
    """Review tools; `Tools` gives them the runtime, the caller's scope and its one-line errors."""

    rt: Runtime

    def _call(self, run: Callable[[], Answer]) -> Answer:
        raise NotImplementedError

    def scope_of(self, ctx: Context) -> Scope:
        raise NotImplementedError

    def review_queue(self, ctx: Context) -> Answer:
        """What dreaming learnt that waits for the user's word before it is used: pending memories
        and replacements held for review. Show them to the user when they ask what was learnt.
        Returns {"items": [{"memory_id", "text", "status", "replaces", "replaced_by", ...}]}."""
        return self._call(lambda: queued(self.rt, self.scope_of(ctx)))

    def review_memory(
        self,
        memory_id: Annotated[str, Field(min_length=1, max_length=255, description="A memory_id from review_queue.")],
        decision: Annotated[Decision, Field(description="accept, or reject (it is not proposed again).")],
        ctx: Context,
        text: Annotated[
            str | None, Field(max_length=4000, description="accept only: the memory in the user's words.")
        ] = None,
    ) -> Answer:
        """Record the user's word on a queued memory, only when the user has given it. Returns
        {"memory_id", "status", "replaced", "kept"}."""
        body = {"decision": decision, "text": text}
        return self._call(lambda: decide(self.rt, self.scope_of(ctx), memory_id, ReviewIn.model_validate(body)))
