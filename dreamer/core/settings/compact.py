"""The settings of context compaction (`dreamer.core.compaction.policy`): a part of `Settings`, kept in
its own module so each stays readable. The defaults are those of the design the policy follows."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings

MAX_TOKENS = 10**15  # as `settings.MAX_COUNT`: the most tokens a setting names


class CompactionSettings(BaseSettings):
    """When a long task's active context is compacted, what may be cleared, what is protected."""

    compact_max_messages: int = Field(
        200, ge=1, le=MAX_TOKENS, description="messages in the active context that make a compaction due"
    )
    compact_max_tokens: int = Field(
        20_000, ge=1, le=MAX_TOKENS, description="tokens in the active context that make a compaction due"
    )
    compact_target_tokens: int = Field(
        10_000,
        ge=1,
        le=MAX_TOKENS,
        description="tokens a compaction aims to bring the active context under when no budget is given",
    )
    compact_large_tokens: int = Field(
        200, ge=0, le=MAX_TOKENS, description="a message of at least this many tokens may be offloaded"
    )
    compact_roles: str = Field(
        "tool", description="comma-separated roles whose message bodies clearing may offload (system never)"
    )
    compact_keep_rounds: int = Field(
        3, ge=0, le=10_000, description="most recent complete tool rounds kept verbatim by every compaction"
    )
    compact_skill_tools: str = Field(
        "Skill,read_skill", description="comma-separated tool names whose results are Skill reads (never cleared)"
    )
    compact_discovery_tools: str = Field(
        "ToolSearch,tool_search,list_tools",
        description="comma-separated tool names whose results are tool discovery (never cleared)",
    )
    compact_skill_budget: int = Field(
        4_000, ge=0, le=MAX_TOKENS, description="most tokens of Skills read that a summarised segment carries again"
    )
    compact_summary_tokens: int = Field(1_500, ge=64, le=MAX_TOKENS, description="reply budget of the summary call")
    compact_tokenizer: str = Field(
        "cl100k",
        description=(
            "how compaction counts tokens: cl100k, the path of the model's tokenizer.json, or estimate "
            "(about four characters a token)"
        ),
    )
