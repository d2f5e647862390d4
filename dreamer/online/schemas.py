"""The request bodies of the HTTP API, the field types they are checked with, and the shape of a
memory in an answer (the API's and the MCP tools')."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter

from dreamer.core.consolidate import normalise
from dreamer.core.days import day_problem
from dreamer.core.models import KINDS, Memory
from dreamer.core.settings import MAX_RECALL_K
from dreamer.ingest.base import MAX_FIELD_CHARS, as_utc, clean_text, identifier_problem
from dreamer.online.agent_writes import AGENT_WRITE_KINDS, Written

MAX_MESSAGES_PER_APPEND = 1000


def _clean(value: Any) -> Any:
    return clean_text(value) if isinstance(value, str) else value


def _identifier(value: str) -> str:
    if problem := identifier_problem(value):
        raise ValueError(f"contains {problem}")
    return value


def _worded(value: str) -> str:
    if len(normalise(value)) < 3:
        raise ValueError("has fewer than 3 characters once punctuation is set aside")
    return value


_NUMBER = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _iso_time(value: Any) -> Any:
    """A time is an ISO 8601 string ("2024-05-01", "2024-05-01T12:00:00Z"), never a number of seconds."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date or time, such as 2024-05-01T12:00:00Z")
    return value


def _has_a_day(value: datetime) -> datetime:
    if problem := day_problem(value):
        raise ValueError(problem)
    return value


# Free text: NUL characters and unpaired surrogates become U+FFFD, as the store keeps them.
Text = Annotated[str, BeforeValidator(_clean)]
ShortText = Annotated[str, Field(max_length=MAX_FIELD_CHARS), BeforeValidator(_clean)]
# Identifiers: refused, never altered, when the store could not keep them as they are.
Ident = Annotated[str, Field(max_length=MAX_FIELD_CHARS), AfterValidator(_identifier)]
GrantId = Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS), AfterValidator(_identifier)]
ProjectName = Annotated[str, Field(min_length=1, max_length=255), AfterValidator(_identifier)]
Time = Annotated[datetime, BeforeValidator(_iso_time)]
# When a message was said: a time whose day every time zone can tell.
SaidAt = Annotated[datetime, BeforeValidator(_iso_time), AfterValidator(_has_a_day)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: ShortText | None = None
    tool_call_id: ShortText | None = None
    tool_calls: list[dict[str, Any]] | None = None
    created_at: SaidAt | None = Field(None, description="when it was said (ISO 8601); default: when it arrives")


class AppendIn(Strict):
    user_id: Ident | None = Field(None, description="must be the token's user when given")
    agent_id: Ident | None = Field(None, description="must be the token's agent when given")
    messages: list[MessageIn] = Field(default_factory=list, max_length=MAX_MESSAGES_PER_APPEND)
    context_tokens: StrictInt | None = Field(
        None, ge=0, le=100_000_000, description="the agent's own count of its context"
    )
    compacted: StrictBool = Field(False, description="the agent compacted its context before these messages")


class RecallIn(Strict):
    query: Text = Field(min_length=1, max_length=4000)
    k: StrictInt | None = Field(None, ge=1, le=MAX_RECALL_K)
    kinds: list[Literal[KINDS]] | None = Field(None, min_length=1, max_length=len(KINDS))  # type: ignore[valid-type]
    since: Time | None = None
    until: Time | None = None


class ProjectRecallIn(RecallIn):
    """A recall of the caller's memories that may name a project: its code work comes beside them."""

    project: ProjectName | None = Field(
        None, description="the project (the repository's name) whose experience and state to include"
    )


_PROJECT: TypeAdapter[str | None] = TypeAdapter(ProjectName | None)


def checked_project(value: str | None) -> str | None:
    """`value` checked as a request's `project` is (`ValidationError` when it cannot be one)."""
    return _PROJECT.validate_python(value)


class MemoryIn(Strict):
    text: Annotated[Text, AfterValidator(_worded)] = Field(min_length=3, max_length=600)
    kind: Literal[AGENT_WRITE_KINDS] = "preference"  # type: ignore[valid-type]
    session_id: GrantId | None = Field(None, description="the session it was said in")
    topic: Text | None = Field(
        None,
        max_length=64,
        description="the slot the fact fills (home_city, employer, deadline:<thing> ...); inferred when absent",
    )
    cardinality: Literal["one", "many"] | None = Field(
        None, description="one: a new value replaces the old; many: values accumulate"
    )


MAX_CONTEXT_MESSAGES = 10_000  # messages one compaction request may carry


class ContextMessageIn(Strict):
    """A message of an agent's active context, as the OpenAI chat format has it."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: ShortText | None = None
    tool_call_id: ShortText | None = None
    tool_calls: list[dict[str, Any]] | None = None
    pinned: StrictBool | None = Field(None, description="keep this message as it is")


class CompactIn(Strict):
    messages: list[ContextMessageIn] = Field(min_length=1, max_length=MAX_CONTEXT_MESSAGES)
    budget: StrictInt | None = Field(None, ge=1, le=100_000_000, description="tokens to fit; default the setting")
    env_state: Text | None = Field(None, max_length=20_000, description="the environment now, carried after a summary")
    session_id: GrantId | None = Field(None, description="the recorded session: its due flush runs first")


def memory_json(m: Memory) -> dict[str, Any]:
    """A memory as an answer shows it."""
    return {
        "memory_id": m.id,
        "text": m.text,
        "kind": m.kind,
        "status": m.status,
        "source": m.source,
        "evidence": m.evidence,
        "topic": m.topic,
        "valid_until": as_utc(m.valid_until).isoformat() if m.valid_until is not None else None,
        "created_at": as_utc(m.created_at).isoformat(),
        "updated_at": as_utc(m.updated_at).isoformat(),
    }


def written_json(w: Written) -> dict[str, Any]:
    """An agent write's answer: the memory it left, and what the write did (added, merged into
    an existing memory, or superseded older values)."""
    answer = {**memory_json(w.memory), "action": w.action, "superseded": list(w.superseded)}
    if w.action == "merged":
        answer["into"] = w.memory.id
    return answer
