"""SQL tables: the system of record (sessions, messages, cursors, memories and their history,
daily notes, dream runs, leases, activity). Times are timezone-aware UTC."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, Text, UniqueConstraint
from sqlmodel import Field, SQLModel

from dreamer.core.run_status import RunStatus, RunStatusColumn

AGENT_KINDS = ("preference", "profile", "focus")
CODE_KINDS = ("root_cause", "interface_behavior", "design_decision")
ONLINE_KINDS = ("daily_note",)
TEAM_KINDS = ("decision", "lesson", "expertise", "context")
KINDS = AGENT_KINDS + CODE_KINDS + ONLINE_KINDS + TEAM_KINDS

STATUSES = ("candidate", "verified", "review_required", "superseded", "forgotten", "reverted", "pending", "rejected")
CURRENT_STATUSES = ("candidate", "verified", "review_required")
REVIEWED_STATUSES = ("pending",)  # waiting for a person (review mode): neither recalled, injected nor shown
REFUSED_STATUSES = ("forgotten", "rejected")  # a person said no: the same text is not proposed again
ROLES = ("system", "user", "assistant", "tool")
MODES = ("agent", "code")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_memory_id() -> str:
    return uuid.uuid4().hex


class Session(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = (
        UniqueConstraint("user_id", "source", "external_id", name="uq_sessions_user_source_ext"),
        Index("ix_sessions_last_seq", "last_seq"),
        Index("ix_sessions_user_updated", "user_id", "updated_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    external_id: str = Field(max_length=255)
    source: str = Field(max_length=32)
    user_id: str = Field(max_length=255)
    agent_id: str | None = Field(default=None, max_length=255)
    project: str | None = Field(default=None, max_length=255)
    team: str | None = Field(default=None, max_length=255)
    mode: str = Field(default="agent", max_length=16)
    title: str | None = Field(default=None, max_length=255)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    message_count: int = 0
    rounds: int = 0
    last_seq: int = 0
    # the context meter's running state (`dreamer.meter.MeterState`), advanced as messages are stored
    token_total: int = 0
    meter_cycle: int = 0
    meter_figure: int = 0
    meter_base: int = 0


class Message(SQLModel, table=True):
    __tablename__ = "messages"
    __table_args__ = (UniqueConstraint("session_id", "seq", name="uq_messages_session_seq"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: int = Field(foreign_key="sessions.id", index=True)
    seq: int
    role: str = Field(max_length=16)
    name: str | None = Field(default=None, max_length=255)
    content: str = Field(sa_column=Column(Text, nullable=False))
    tool_call_id: str | None = Field(default=None, max_length=255)
    tool_calls: Any | None = Field(default=None, sa_column=Column(JSON))
    meta: Any | None = Field(default=None, sa_column=Column(JSON))
    content_hash: str = Field(max_length=64)
    created_at: datetime = Field(default_factory=utcnow)
    token_count: int = 0


class Cursor(SQLModel, table=True):
    __tablename__ = "cursors"
    __table_args__ = (Index("ix_cursors_status_processed", "status", "processed_seq"),)

    session_id: int = Field(foreign_key="sessions.id", primary_key=True)
    processed_seq: int = 0
    status: str = Field(default="ok", max_length=16)  # ok | failed | quarantined
    attempts: int = 0
    last_error: str | None = Field(default=None, sa_column=Column(Text))
    updated_at: datetime = Field(default_factory=utcnow)


class Memory(SQLModel, table=True):
    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_scope_status", "user_id", "agent_id", "project", "status"),
        Index("ix_memories_outbox", "indexed_at"),
        Index("ix_memories_hash", "user_id", "content_hash"),
        Index("ix_memories_scope_topic", "user_id", "agent_id", "project", "topic"),
    )

    id: str = Field(default_factory=new_memory_id, primary_key=True, max_length=32)
    user_id: str = Field(max_length=255)
    agent_id: str | None = Field(default=None, max_length=255)
    project: str | None = Field(default=None, max_length=255)
    team: str | None = Field(default=None, max_length=255)
    kind: str = Field(max_length=32)
    text: str = Field(sa_column=Column(Text, nullable=False))
    content_hash: str = Field(max_length=64)
    status: str = Field(default="candidate", max_length=24)
    source: str = Field(default="dream", max_length=16)
    evidence: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    tags: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    importance: float = 0.5
    untrusted: bool = False
    topic: str | None = Field(default=None, max_length=64)  # the slot it fills (`dreamer.core.topics`)
    cardinality: str | None = Field(default=None, max_length=8)  # one | many
    valid_from: datetime = Field(default_factory=utcnow)
    valid_to: datetime | None = None
    valid_until: datetime | None = None  # when what it says is over (`dreamer.core.expiry`): past after it
    superseded_by: str | None = Field(default=None, max_length=32)
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    last_seen: datetime = Field(default_factory=utcnow)
    indexed_at: datetime | None = None


class MemoryEvent(SQLModel, table=True):
    __tablename__ = "memory_events"

    id: int | None = Field(default=None, primary_key=True)
    memory_id: str = Field(foreign_key="memories.id", index=True, max_length=32)
    event: str = Field(max_length=16)  # add | merge | supersede | forget | hold | revert
    reason: str | None = Field(default=None, sa_column=Column(Text))
    run_id: int | None = Field(default=None, foreign_key="dream_runs.id")
    data: Any | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow)


class DailyNote(SQLModel, table=True):
    __tablename__ = "daily_notes"
    __table_args__ = (
        UniqueConstraint("session_id", "window_end_seq", "position", name="uq_daily_notes_window"),
        Index("ix_daily_notes_user_day", "user_id", "day"),
    )

    id: int | None = Field(default=None, primary_key=True)
    user_id: str = Field(max_length=255)
    agent_id: str | None = Field(default=None, max_length=255)
    session_id: int = Field(foreign_key="sessions.id")
    day: str = Field(max_length=10)
    text: str = Field(sa_column=Column(Text, nullable=False))
    memory_id: str | None = Field(default=None, max_length=32)
    window_start_seq: int
    window_end_seq: int
    position: int = 0
    cycle: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class DreamRun(SQLModel, table=True):
    __tablename__ = "dream_runs"
    __table_args__ = (Index("ix_dream_runs_status", "status"),)

    id: int | None = Field(default=None, primary_key=True)
    trigger: str = Field(default="manual", max_length=32)
    status: RunStatus = Field(default=RunStatus.RUNNING, sa_type=RunStatusColumn(24))
    extractor: str = Field(default="rules", max_length=16)
    started_at: datetime = Field(default_factory=utcnow)
    finished_at: datetime | None = None
    sessions: int = 0
    messages: int = 0
    candidates: int = 0
    added: int = 0
    merged: int = 0
    superseded: int = 0
    rejected: int = 0
    held: int = 0  # supersedes and forgets the guard held for a person (`review_required`)
    failed_sessions: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    unbilled_calls: int = 0  # calls (timed out) the server never reported the usage of: the bill is a floor
    rejections: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    error: str | None = Field(default=None, sa_column=Column(Text))


class ViewDue(SQLModel, table=True):
    """A user whose Markdown view is behind SQL. Marked in the transaction that marks memories
    indexed, each mark with a fresh random `token`; cleared once rendered, only if that is
    still the mark the renderer read."""

    __tablename__ = "views_due"

    user_id: str = Field(primary_key=True, max_length=255)
    token: int = Field(sa_type=BigInteger)


class Lease(SQLModel, table=True):
    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=255)
    owner: str = Field(max_length=255)
    expires_at: datetime
    heartbeat_at: datetime | None = None  # set by a holder that beats while it works (a pass); None: it does not


class Activity(SQLModel, table=True):
    __tablename__ = "activity"

    key: str = Field(primary_key=True, max_length=255)
    in_flight: int = 0
    last_seen: datetime = Field(default_factory=utcnow)


class SchedulerState(SQLModel, table=True):
    __tablename__ = "scheduler_state"

    name: str = Field(primary_key=True, max_length=64)
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    last_run_id: int | None = None
    last_skip_reason: str | None = Field(default=None, sa_column=Column(Text))
    consecutive_skips: int = 0
    updated_at: datetime = Field(default_factory=utcnow)


class WatchedFile(SQLModel, table=True):
    """A transcript file of a watched source (or a hook's transcript) and how far it was read:
    `offset_bytes` up to the end of its last complete line, whose bytes hash to `head_hash`."""

    __tablename__ = "watched_files"

    path_key: str = Field(primary_key=True, max_length=64)  # sha256 of `path`
    path: str = Field(sa_column=Column(Text, nullable=False))
    format: str = Field(max_length=32)
    user_id: str = Field(max_length=255)
    offset_bytes: int = Field(default=0, sa_type=BigInteger)
    size_bytes: int = Field(default=0, sa_type=BigInteger)
    mtime_ns: int = Field(default=0, sa_type=BigInteger)
    head_hash: str = Field(default="", max_length=64)
    messages: int = 0  # messages this file added to the store, in all
    sessions: int = 0  # sessions it holds, as last read
    last_seen_at: datetime = Field(default_factory=utcnow)
    ingested_at: datetime | None = None
    problem: str | None = Field(default=None, sa_column=Column(Text))


class LLMEndpoint(SQLModel, table=True):
    """What was learnt of one model at one endpoint: the structured-output mode it answered in,
    its context window and where that came from, and what `dreamer llm check` measured."""

    __tablename__ = "llm_endpoints"

    base_url: str = Field(primary_key=True, max_length=512)
    model: str = Field(primary_key=True, max_length=255)
    mode: str | None = Field(default=None, max_length=32)
    context_window: int | None = None
    window_source: str | None = Field(default=None, max_length=32)
    checked_seconds: float | None = None  # the latency of `llm check`'s extraction
    checked_tokens: int | None = None  # the tokens it read and wrote (prompt + completion)
    updated_at: datetime = Field(default_factory=utcnow)


class ProjectState(SQLModel, table=True):
    """One field of the state of a unit of work (`checks.typecheck`, `consumers.migrated`), with
    its status (`dreamer.core.code_work.experience.STATE_STATUSES`), its evidence and what it depends on."""

    __tablename__ = "project_states"
    __table_args__ = (
        UniqueConstraint("user_id", "project", "branch", "unit", "field", name="uq_project_states_field"),
        Index("ix_project_states_scope", "user_id", "project", "branch"),
    )

    id: str = Field(default_factory=new_memory_id, primary_key=True, max_length=32)
    user_id: str = Field(max_length=255)
    project: str = Field(max_length=255)
    branch: str = Field(default="main", max_length=255)
    unit: str = Field(max_length=255)
    field: str = Field(max_length=255)
    value: Any | None = Field(default=None, sa_column=Column(JSON))
    status: str = Field(default="in_progress", max_length=24)
    evidence: Any = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    depends_on: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    reason: str | None = Field(default=None, sa_column=Column(Text))  # why it has its status
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ExperienceEntry(SQLModel, table=True):
    """A reusable lesson of code work: when it applies, where it failed, who verified it, and what
    sends it back to review (`dreamer.core.code_work.experience`)."""

    __tablename__ = "experience_entries"
    __table_args__ = (Index("ix_experience_entries_scope", "user_id", "project", "branch", "status"),)

    id: str = Field(default_factory=new_memory_id, primary_key=True, max_length=32)
    user_id: str = Field(max_length=255)
    project: str = Field(max_length=255)
    branch: str = Field(default="main", max_length=255)
    unit: str | None = Field(default=None, max_length=255)
    text: str = Field(sa_column=Column(Text, nullable=False))
    basis: str = Field(default="inferred", max_length=16)  # observed | inferred | confirmed
    origin: str = Field(default="agent", max_length=16)  # agent | tool | repository | person
    status: str = Field(default="candidate", max_length=24)
    conditions: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    counterexamples: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    unverified: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    source_tasks: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    verified_units: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    versions: Any = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    depends_on: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    keywords: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    evidence: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    ever_verified: bool = False
    untrusted: bool = False
    note: str | None = Field(default=None, sa_column=Column(Text))  # e.g. repository text is evidence
    reason: str | None = Field(default=None, sa_column=Column(Text))  # why it has its status
    confirmed_by: str | None = Field(default=None, max_length=255)
    last_confirmed: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)


class ExperienceEvent(SQLModel, table=True):
    """The history of project states and experience entries: every change, with its reason."""

    __tablename__ = "experience_events"
    __table_args__ = (Index("ix_experience_events_subject", "subject_id"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: str = Field(max_length=255)
    project: str = Field(max_length=255)
    branch: str = Field(max_length=255)
    subject: str = Field(max_length=8)  # state | entry
    subject_id: str = Field(max_length=32)
    event: str = Field(max_length=24)  # add | set | verify | counterexample | confirm | demote | check
    status_before: str | None = Field(default=None, max_length=24)
    status_after: str = Field(max_length=24)
    reason: str | None = Field(default=None, sa_column=Column(Text))
    data: Any | None = Field(default=None, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=utcnow)


class Team(SQLModel, table=True):
    """A team of one user's agents: its memory is written by the leader alone, at the end of each
    round, and read by every member; a temporary team reads but never writes."""

    __tablename__ = "teams"
    __table_args__ = (UniqueConstraint("user_id", "name", name="uq_teams_user_name"),)

    id: int | None = Field(default=None, primary_key=True)
    user_id: str = Field(max_length=255)
    name: str = Field(max_length=255)
    leader: str = Field(max_length=255)  # the agent id whose token may close a round
    temporary: bool = False
    rounds: int = 0  # rounds closed so far
    created_at: datetime = Field(default_factory=utcnow)


class OffloadedBody(SQLModel, table=True):
    """A message body a compaction took out of an agent's active context (`dreamer.core.compaction.policy`),
    kept for `restore_offloaded`: owned like a session, its secrets redacted as messages' are."""

    __tablename__ = "offloaded_bodies"
    __table_args__ = (Index("ix_offloaded_bodies_user", "user_id", "created_at"),)

    id: str = Field(primary_key=True, max_length=32)  # ofl_ and 20 hex digits, drawn per body
    user_id: str = Field(max_length=255)
    agent_id: str | None = Field(default=None, max_length=255)
    project: str | None = Field(default=None, max_length=255)
    team: str | None = Field(default=None, max_length=255)
    session_id: str | None = Field(default=None, max_length=255)  # the agent's own id of its conversation
    role: str = Field(max_length=16)
    tool: str | None = Field(default=None, max_length=255)
    tool_call_id: str | None = Field(default=None, max_length=255)
    body: str = Field(sa_column=Column(Text, nullable=False))
    tokens: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class ProviderBreaker(SQLModel, table=True):
    """The external memory provider's circuit breaker as its process last changed it
    (`dreamer.providers.guard`): `dreamer status` reads it from any shell."""

    __tablename__ = "provider_breakers"

    provider: str = Field(primary_key=True, max_length=64)
    breaker: str = Field(max_length=16)  # closed | open | probe
    reason: str | None = Field(default=None, sa_column=Column(Text))  # why it last opened
    changes: Any = Field(default_factory=list, sa_column=Column(JSON, nullable=False))  # the latest, oldest first
    updated_at: datetime = Field(default_factory=utcnow)
