"""The settings of team rounds and memory modes (a part of `Settings`, kept apart for size):
which memory a recall reads and a write feeds, and how an external provider is reached."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings

MAX_COUNT = 2**31 - 1
MemoryMode = Literal["builtin", "external", "both", "off"]
MEMORY_MODES: tuple[MemoryMode, ...] = ("builtin", "external", "both", "off")


class ModeSettings(BaseSettings):
    """Fields only: `Settings` adds its own configuration (the ``DREAMER_`` prefix, the env file)."""

    team_round_entries: int = Field(
        12, ge=1, le=MAX_COUNT, description="Most items one closed team round may write to the team's memory"
    )
    memory_mode: MemoryMode = Field(
        "builtin",
        description="builtin: the dreamer's own memory; external: the provider's; both: merged, each hit labelled; "
        "off: nothing read or written",
    )
    memory_provider: str = Field("mem0", description="The external provider, by its `dreamer.providers` entry point")
    provider_deadline_ms: int = Field(
        300, ge=1, le=600_000, description="Milliseconds recall waits for the provider's prefetch beside its own"
    )
    provider_breaker_failures: int = Field(
        3, ge=1, le=1000, description="Failures in a row (errors or missed deadlines) that open the provider's breaker"
    )
    provider_breaker_cooldown_seconds: float = Field(
        30.0, ge=0.0, le=86_400.0, description="Seconds the breaker stays open before one probe is let through"
    )
    provider_sync_batch: int = Field(32, ge=1, le=10_000, description="Turns pushed to the provider in one sync call")
    provider_sync_retries: int = Field(
        3, ge=0, le=100, description="Times a failed sync batch is tried again (backing off) before it is dropped"
    )
    provider_url: str = Field(
        "", description="The http provider's base URL: it answers POST {url}/search and POST {url}/turns"
    )
    provider_token: str = Field("", description="Bearer token sent to the http provider (none when empty)")
    mem0_config: str = Field(
        "",
        description="JSON merged over the mem0 provider's configuration (llm, embedder, vector_store); by default "
        "it uses llm_base_url and embed_base_url, and an on-disk Qdrant under data_dir/mem0",
    )
