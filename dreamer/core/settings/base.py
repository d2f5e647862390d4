"""The one `Settings` object: read once at the edge (CLI, worker start) and passed in."""

from __future__ import annotations

import errno
import os
from datetime import tzinfo
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import SettingsConfigDict

from dreamer.core.days import zone
from dreamer.core.errors import ConfigError, validation_summary
from dreamer.core.settings.compact import CompactionSettings
from dreamer.core.settings.modes import ModeSettings
from dreamer.core.settings.person import PersonSettings

MAX_RECALL_K = 100  # the most hits one recall returns (CLI, API and DREAMER_RECALL_K)
MAX_CONTEXT_BUDGET = 100_000  # the largest context block, in tokens
CENTURY_DAYS = 100 * 366  # the longest duration a setting may name: dates past it overflow
CENTURY_SECONDS = CENTURY_DAYS * 86_400
MAX_COUNT = 10**15  # the most tokens, bytes, characters, messages or sessions a setting names (sums fit SQL integers)
MAX_RETRIES = 1000  # the most retries, attempts or failures in a row a setting may name
MAX_THREADS = 1024  # the most threads a setting may start
MAX_EMBED_DIM = 65_535  # the longest dense vector Qdrant holds
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")  # what redis-py's from_url reads


class Settings(PersonSettings, ModeSettings, CompactionSettings):
    """Every tunable of dreamer. Environment variables use the ``DREAMER_`` prefix."""

    model_config = SettingsConfigDict(
        env_prefix="DREAMER_",
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        allow_inf_nan=False,  # an infinite weight or timeout would pass every lower bound
    )

    # --- places -------------------------------------------------------------
    data_dir: Path = Field(Path(".dreamer"), description="SQLite file, Qdrant Edge folder, Markdown")
    database_url: str = Field("", description="SQLAlchemy URL; empty = SQLite file in data_dir")
    qdrant_url: str = Field("", description="Qdrant server URL; empty = embedded Qdrant Edge")
    qdrant_api_key: str = ""
    qdrant_collection: str = "dreamer_memories"
    min_free_mb: int = Field(
        100,
        ge=0,
        le=MAX_COUNT,
        description="A pass or an ingest writes nothing while the data folder's disk has less free (MB); never below"
        " a hard floor of 16 MB, even at 0",
    )
    store_raw_messages: bool = Field(
        False, description="Keep messages as they were said; default: secrets redacted before they are stored"
    )
    index_flush_seconds: float = Field(
        5.0,
        ge=0,
        le=CENTURY_SECONDS,
        description="Most seconds between disk flushes of the embedded index after writes; 0 = every write",
    )

    # --- LLM ----------------------------------------------------------------
    llm_base_url: str = Field("", description="OpenAI-compatible endpoint; empty = rules extractor")
    llm_api_key: str = "none"
    llm_model: str = "gpt-4o-mini"
    llm_timeout: float = Field(
        0,
        ge=0,
        le=CENTURY_SECONDS,
        description="Seconds one request may take; 0 = what `dreamer llm check` learnt, else 300 for a "
        "local endpoint and 60 for a remote one",
    )
    llm_max_retries: int = Field(4, ge=0, le=MAX_RETRIES)
    llm_retry_base: float = Field(1.0, ge=0, le=CENTURY_SECONDS)
    llm_retry_cap: float = Field(30.0, ge=0, le=CENTURY_SECONDS)
    llm_pass_token_budget: int = Field(2_000_000, ge=0, le=MAX_COUNT)
    llm_breaker_threshold: int = Field(3, ge=0, le=MAX_RETRIES)
    llm_breaker_cooldown_seconds: float = Field(
        300,
        ge=0,
        le=CENTURY_SECONDS,
        description="Seconds background flushes stop calling the LLM after llm_breaker_threshold failures in a row",
    )
    llm_output_mode: Literal["auto", "json_schema", "json_object_schema", "json_object", "prompt"] = Field(
        "auto",
        description="Structured output: auto = negotiate per endpoint and model (json_schema, then json_object "
        "with the schema, then json_object, then the schema in the prompt alone) and remember what worked",
    )
    llm_context_window: int = Field(
        0,
        ge=0,
        le=MAX_COUNT,
        description="The model's context window in tokens; 0 = ask the server (/v1/models, /props, /api/show), "
        "8192 when it does not say",
    )
    llm_reply_tokens: int = Field(
        4_096, ge=64, le=MAX_COUNT, description="Most tokens a reply may take (every request sets max_tokens)"
    )

    # --- embeddings ---------------------------------------------------------
    embedder: Literal["auto", "local", "openai", "none"] = "auto"
    embed_base_url: str = Field("", description="OpenAI-compatible /v1/embeddings; empty = llm_base_url")
    embed_api_key: str = Field("", description="API key of the embeddings endpoint; empty = llm_api_key")
    embed_model: str = "text-embedding-3-small"
    embed_dim: int = Field(384, ge=1, le=MAX_EMBED_DIM)
    embed_batch: int = Field(64, ge=1, le=10_000)

    # --- the dream pass ---------------------------------------------------------
    dream_interval_seconds: float = Field(4 * 3600, gt=0, le=CENTURY_SECONDS)
    warmup_seconds: float = Field(120, ge=0, le=CENTURY_SECONDS)
    busy_window_seconds: float = Field(60, ge=0, le=CENTURY_SECONDS)
    backoff_base_seconds: float = Field(60, ge=0, le=CENTURY_SECONDS)
    backoff_cap_seconds: float = Field(30 * 60, ge=0, le=CENTURY_SECONDS)
    max_sessions_per_pass: int = Field(10, ge=1, le=MAX_COUNT)
    min_rounds: int = Field(4, ge=0, le=MAX_COUNT)
    max_age_days: float = Field(30, ge=0, le=CENTURY_DAYS)
    quiet_period_seconds: float = Field(0, ge=0, le=CENTURY_SECONDS)
    short_quiet_seconds: float = Field(
        6 * 3600,
        ge=0,
        le=CENTURY_SECONDS,
        description="Seconds a session of fewer than min_rounds rounds must go without new messages before it is due",
    )
    tokens_per_session_pass: int = Field(30_000, ge=1, le=MAX_COUNT)
    chunk_tokens: int = Field(12_000, ge=1, le=MAX_COUNT)
    overlap_messages: int = Field(2, ge=0, le=1000)
    entries_per_session: int = Field(5, ge=0, le=MAX_COUNT)
    sessions_per_call: int = Field(
        16,
        ge=1,
        le=1000,
        description="Most consecutive due sessions of one owner whose new messages share extraction calls "
        "(short sessions are packed into one transcript up to chunk_tokens; 1: a call never spans sessions)",
    )
    max_attempts: int = Field(3, ge=1, le=MAX_RETRIES)
    lease_seconds: float = Field(600, gt=0, le=CENTURY_SECONDS)
    triage: bool = True
    grounding_min_similarity: float = Field(
        0.15,
        ge=-1,
        le=1,
        description="Cosine similarity to a message it cites from which a candidate worded in its own way "
        "(a third to a half of its content words said there) still counts as grounded; with fewer said, "
        "or a name or number never said, no similarity does",
    )
    dreams_cap: int = Field(50, ge=0, le=MAX_COUNT)

    # --- consolidation ------------------------------------------------------
    dup_threshold: float = Field(0.90, ge=0, le=1)
    # neighbours from this similarity go to the judge; at most dup_threshold (_not_above_dup_threshold)
    ambiguous_low: float = Field(0.5, ge=0, le=1)
    change_low: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Judge band's floor for a candidate that announces a change (moved, now, no longer)",
    )
    route_margin: float = Field(
        0.15, ge=0, le=1, description="How far above the crowd of related memories a band neighbour must stand"
    )
    neighbours: int = Field(5, ge=1, le=1000)
    route_max_pairs: int = Field(3, ge=1, le=50)  # judge pairs per candidate at most
    guard_share: float = Field(
        0.25, ge=0, le=1, description="Share of a user's current memories a pass may supersede or forget unreviewed"
    )
    guard_min: int = Field(
        4, ge=0, le=MAX_COUNT, description="Supersedes and forgets a pass may always make per user (small stores)"
    )

    # --- recall and context ---------------------------------------------------
    dense_weight: float = Field(0.7, ge=0)
    text_weight: float = Field(0.3, ge=0)
    candidate_multiplier: int = Field(4, ge=1, le=1000)
    recall_k: int = Field(5, ge=1, le=MAX_RECALL_K)
    context_budget: int = Field(800, ge=0, le=MAX_CONTEXT_BUDGET)

    # --- online flush ---------------------------------------------------------
    context_window: int = Field(128_000, ge=1, le=MAX_COUNT)
    reserve_floor: int = Field(20_000, ge=0, le=MAX_COUNT)
    soft_threshold: int = Field(4_000, le=MAX_COUNT)  # checked with the other flush settings (validate_flush_settings)
    flush_every_messages: int = Field(200, le=MAX_COUNT)  # ditto
    tool_result_chars: int = Field(2_000, ge=0, le=MAX_COUNT)

    # --- ingest ---------------------------------------------------------------
    max_message_bytes: int = Field(1_000_000, ge=1, le=MAX_COUNT)
    timezone: str = Field(
        "UTC",
        description="IANA time zone the user's days are counted in (day headings, daily notes, evidence days)",
    )

    # --- services -------------------------------------------------------------
    redis_url: str = "redis://127.0.0.1:6379/0"
    broker_url: str = "redis://127.0.0.1:6379/1"
    result_backend: str = "redis://127.0.0.1:6379/2"

    @field_validator("redis_url")
    @classmethod
    def _redis_scheme(cls, value: str) -> str:
        if value and not value.lower().startswith(REDIS_SCHEMES):  # checked now, not at the first busy signal
            raise ValueError(f"must be a {', '.join(REDIS_SCHEMES[:-1])} or {REDIS_SCHEMES[-1]} URL")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        zone(value)
        return value

    @field_validator("ambiguous_low")
    @classmethod
    def _not_above_dup_threshold(cls, value: float, info: ValidationInfo) -> float:
        dup = info.data.get("dup_threshold")  # declared first: absent only when it was refused itself
        if dup is not None and value > dup:
            raise ValueError(f"must be at most DREAMER_DUP_THRESHOLD ({dup}), got {value}")
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _names_a_folder(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            raise ValueError("must name a folder (empty would put the store in the working directory)")
        if isinstance(value, (str, Path)) and _link_loop(Path(value)):
            raise ValueError(f"cannot be followed to a folder: {value} is in a loop of symbolic links")
        return value

    # --- derived places ---------------------------------------------------------
    @property
    def tz(self) -> tzinfo:
        """The time zone the user's days are counted in."""
        return zone(self.timezone)

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'dreamer.db').resolve()}"

    @property
    def index_dir(self) -> Path:
        return self.data_dir / "index"

    @property
    def workspace_dir(self) -> Path:
        return self.data_dir / "workspace"

    @property
    def llm_configured(self) -> bool:
        return bool(self.llm_base_url)

    # --- online companion
    api_tokens: str = Field(
        "", description="JSON list of {token, user_id, agent_id?, team?, role: writer|reader, name?}; empty = none"
    )
    api_max_body_bytes: int = Field(2_000_000, ge=1, le=MAX_COUNT)
    flush_max_tokens: int = Field(
        30_000, le=MAX_COUNT, description="most transcript tokens one flush sends to the model"
    )
    flush_max_notes: int = Field(8, le=1000)  # the flush counts are checked together (validate_flush_settings)
    flush_workers: int = Field(2, le=MAX_THREADS)

    # --- agents on this machine: `dreamer mcp` over stdio, Claude Code hooks, watched folders
    local_user: str = Field(
        "", description="user of `dreamer mcp` (stdio) and `dreamer hook`; empty = the login name of the OS user"
    )
    local_agent: str = Field("", description="agent id of `dreamer mcp` (stdio) and `dreamer hook`; empty = none")
    local_team: str = Field("", description="team of `dreamer mcp` (stdio) and `dreamer hook`; empty = none")
    local_role: Literal["writer", "reader"] = Field(
        "writer", description="role of `dreamer mcp` over stdio: a reader gets only the read tools"
    )
    hook_timeout_seconds: float = Field(
        20, gt=0, le=3600, description="most seconds a `dreamer hook` call works before it gives up (and exits 0)"
    )
    hook_recall_k: int = Field(
        0, ge=0, le=MAX_RECALL_K, description="recall hits the UserPromptSubmit hook adds for the prompt; 0 = none"
    )
    sources: str = Field(
        "",
        description='JSON list of watched transcript folders: {"path", "format", "user_id", "agent_id"?, "team"?, '
        '"pattern"?}; ingested before every pass; empty = none',
    )

    # --- scheduler and workers
    busy_backend: Literal["sql", "redis"] = Field("sql", description="Where activity is counted")
    busy_key_prefix: str = "dreamer:busy"
    busy_inflight_ttl_seconds: float = Field(
        3600, ge=0, le=CENTURY_SECONDS, description="An in-flight count left by a crash expires"
    )
    scheduler_executor: Literal["inline", "celery"] = "inline"
    scheduler_misfire_grace_seconds: float = Field(300, ge=0, le=CENTURY_SECONDS)
    index_wait_seconds: float = Field(
        600, ge=0, le=CENTURY_SECONDS, description="How long a worker waits for the embedded index"
    )
    user_lock_wait_seconds: float = Field(
        60,
        ge=0,
        le=CENTURY_SECONDS,
        description="How long a writer waits while another consolidates the same user",
    )
    celery_queue: str = "dreamer"
    celery_visibility_timeout_seconds: float = Field(
        3600, gt=0, le=CENTURY_SECONDS, description="Redis broker: redeliver unacked after"
    )
    task_max_retries: int = Field(8, ge=0, le=MAX_RETRIES)
    task_retry_base_seconds: float = Field(5, ge=0, le=CENTURY_SECONDS)
    task_retry_cap_seconds: float = Field(600, ge=0, le=CENTURY_SECONDS)

    # --- evaluation and retrieval
    recall_search: Literal["hybrid", "dense", "text"] = Field(
        "hybrid",
        description="Recall signals: dense + BM25 with the speaker, date and passage signals, or one search alone",
    )
    speaker_weight: float = Field(0.3, ge=0, description="Added when a memory rests on the one speaker a query names")
    context_radius: int = Field(
        2, ge=0, le=1000, description="Messages each side of the evidence in a memory's BM25 document"
    )
    context_line_chars: int = Field(
        600, ge=1, le=MAX_COUNT, description="Longest message text shown in a memory's BM25 document"
    )
    recall_candidates: int = Field(
        100, ge=1, le=10_000, description="Fewest candidates each search of a recall returns"
    )
    serve_torch_threads: int = Field(
        1,
        ge=0,
        le=MAX_THREADS,
        description="Threads of the local embedder (BLAS, or torch) in `dreamer serve` and `dreamer mcp`, "
        "which embed one query at a time; 0 = the libraries' defaults",
    )
    repeat_penalty: float = Field(
        0.3, ge=0, description="Taken off a recall candidate whose evidence messages all back a better-ranked one"
    )
    passage_weight: float = Field(
        0.2,
        ge=0,
        description="Added to a recall candidate resting on messages near those of the best candidates (0: off)",
    )
    passage_top: int = Field(2, ge=0, le=1000, description="How many of the best recall candidates set the passage")
    passage_window: int = Field(4, ge=0, le=100, description="Messages each side of their evidence that count as near")
    date_weight: float = Field(
        0.3, ge=0, description="Added to a recall candidate said on the date a query names (0: off)"
    )
    date_slack_days: int = Field(
        7, ge=0, le=CENTURY_DAYS, description="Days either side of a day a query names that still count"
    )
    said_match: bool = Field(
        True,
        description="A recall candidate's dense score is the better of its own and its evidence messages' (rescaled to its own)",
    )
    said_offset: float = Field(
        0.01, ge=-1, le=1, description="Added to the rescaled similarity of the evidence messages"
    )


def _link_loop(path: Path) -> bool:
    """Whether following `path` runs in a loop of symbolic links (a missing path is not one)."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment (and `.env`) with `overrides` on top; a bad value is a
    `ConfigError` naming its variable, and a `.env` that is not UTF-8 one naming the file, not a
    traceback."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(validation_summary(exc, where=_variable)) from None
    except UnicodeDecodeError:
        raise ConfigError(_not_utf8(_env_files(overrides))) from None


def _variable(loc: tuple[int | str, ...]) -> str:
    return "DREAMER_" + "_".join(map(str, loc)).upper()


def _env_files(overrides: dict[str, Any]) -> list[Path]:
    """The `.env` files the settings are read from (`_env_file` overrides the configured one)."""
    named = overrides.get("_env_file", Settings.model_config.get("env_file"))
    if named is None:
        return []
    names = [named] if isinstance(named, (str, Path)) else list(named)
    return [Path(name).expanduser() for name in names]


def _not_utf8(files: list[Path]) -> str:
    """Which of `files` is not UTF-8, and at which byte."""
    for path in files:
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as bad:
            return f"cannot read settings from {path.resolve()}: not valid UTF-8 (byte offset {bad.start})"
        except OSError:
            continue
    return "cannot read settings: a .env file is not valid UTF-8"
