"""The MCP tools of context compaction (`compact_context`, `restore_offloaded`), mixed into
`dreamer.online.mcp.server.Tools`: each calls what its HTTP route calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from dreamer.core.scope import Scope
from dreamer.engine.runtime import Runtime
from dreamer.online.compaction.compact import compact_context, restore_offloaded
from dreamer.online.schemas import CompactIn

Answer = dict[str, Any]


class ContextTools:
    """Compacting the caller's active context and restoring what it offloaded."""

    rt: Runtime
    _call: Callable[[Callable[[], Answer]], Answer]
    scope_of: Callable[[Context], Scope]

    def compact_context(
        self,
        messages: Annotated[
            list[dict[str, Any]],
            Field(description="Your active context: OpenAI-format messages, tool calls and tool results included."),
        ],
        ctx: Context,
        budget: Annotated[int | None, Field(ge=1, description="Tokens the context must fit; default 10000.")] = None,
        env_state: Annotated[
            str | None, Field(description="The environment now (cwd, branch, open files), kept after a summary.")
        ] = None,
        session_id: Annotated[str | None, Field(description="Your conversation's id, if you record it.")] = None,
    ) -> Answer:
        """Shrink your context when it nears its limit: old tool output is replaced by markers
        (no model call); when that is not enough, the newest turns that fit stay and the older
        ones go out whole behind one marker, summarised first when a model is configured.
        Returns {"messages": the context to continue with, "path": clear | summary | offload |
        over | unchanged, "covers", "offloaded": [{"id", "role", "tool", "tokens"}] for
        restore_offloaded, "tokens_before", "tokens_after", "budget_use", "counter"}."""

        def run() -> Answer:
            fields = {"messages": messages, "budget": budget, "env_state": env_state, "session_id": session_id}
            body = CompactIn.model_validate({k: v for k, v in fields.items() if v is not None})
            sent = [m.model_dump(exclude_none=True) for m in body.messages]
            found = compact_context(
                self.rt,
                self.scope_of(ctx),
                sent,
                budget=body.budget,
                env_state=body.env_state,
                session_id=body.session_id,
            )
            return found.as_json()

        return self._call(run)

    def restore_offloaded(
        self,
        offload_id: Annotated[
            str, Field(min_length=1, max_length=255, description="The id in a marker: ofl_ and hex digits.")
        ],
        ctx: Context,
    ) -> Answer:
        """Read back a tool output a compaction offloaded, by the id its marker names. Returns
        {"id", "content", "tool", "tool_call_id", "tokens", ...}."""
        return self._call(lambda: restore_offloaded(self.rt, self.scope_of(ctx), offload_id))
