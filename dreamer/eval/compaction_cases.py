"""The cases of `dreamer eval compaction`: read and checked whole before anything runs, and what
each figure of a row is made of (the facts kept, the truncation baseline).

A case file is ``{"cases": [{"name", "messages", "facts": [{"kind", "must_contain"}],
"budgets"}]}``; messages are in the OpenAI chat format, each tool call answered by its result.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dreamer.core.compaction.policy import Msg, calls_text, text_of, total_tokens, units
from dreamer.core.errors import IngestError, validation_summary
from dreamer.ingest.base import read_bytes


class Fact(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: str = Field(min_length=1)  # id, constraint, pending_step, ...: reported, not scored apart
    must_contain: list[str] = Field(min_length=1)


class Case(BaseModel):
    model_config = ConfigDict(extra="ignore")
    name: str = Field(min_length=1)
    messages: list[dict[str, Any]] = Field(min_length=1)
    facts: list[Fact] = Field(min_length=1)
    budgets: list[int] = Field(min_length=1)


def load_cases(path: Path) -> list[Case]:
    """Every case of the file; `IngestError` naming the case and what is wrong otherwise."""
    raw = read_bytes(path)
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise IngestError(f"{path}: not JSON: {exc}") from None
    items = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(items, list) or not items:
        raise IngestError(f'{path}: expected {{"cases": [...]}} with at least one case')
    cases: list[Case] = []
    for k, item in enumerate(items, start=1):
        try:
            case = Case.model_validate(item)
        except ValidationError as exc:
            raise IngestError(f"{path}: case {k}: {validation_summary(exc)}") from None
        if problem := message_problem(case.messages) or ("a budget is below 1" if min(case.budgets) < 1 else None):
            raise IngestError(f"{path}: case {k} ({case.name}): {problem}")
        cases.append(case)
    if len({c.name for c in cases}) != len(cases):
        raise IngestError(f"{path}: two cases have the same name")
    return cases


def message_problem(messages: Sequence[Msg]) -> str | None:
    """Why the messages are no conversation a compaction can take: a message without a role of
    the chat format, or tool calls that are not a list. (A call still waiting for its result is
    taken as it is: compaction never separates what is paired, and never pairs what is not.)"""
    for i, m in enumerate(messages, start=1):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            return f"message {i} has no role of system, user, assistant or tool"
        if not isinstance(m.get("tool_calls") or [], list):
            return f"message {i}: tool_calls must be a list"
    return None


# --------------------------------------------------------------------------- scoring


def visible_text(messages: Sequence[Msg], bodies: dict[str, str]) -> str:
    """What the agent can still read: the segment's contents and tool calls, and each offloaded
    body whose marker's id is in the segment. Lower case."""
    shown = "\n".join(f"{text_of(m)}\n{calls_text(m)}" for m in messages)
    restorable = [body for oid, body in bodies.items() if oid in shown]
    return "\n".join([shown, *restorable]).lower()


def facts_kept(case: Case, messages: Sequence[Msg], bodies: dict[str, str]) -> float:
    """The share of the case's facts whose every `must_contain` string the agent can still read."""
    text = visible_text(messages, bodies)
    kept = sum(all(s.lower() in text for s in f.must_contain) for f in case.facts)
    return round(kept / len(case.facts), 4)


def truncated(messages: Sequence[Msg], budget: int) -> list[Msg]:
    """The truncation baseline: system messages kept, the oldest other units dropped (a call
    with its results) until the rest fits `budget`."""
    groups = units(messages)
    system = [g for g in groups if messages[g[0]].get("role") == "system"]
    rest = [g for g in groups if messages[g[0]].get("role") != "system"]
    cost = {g[0]: total_tokens([messages[i] for i in g]) for g in groups}
    total = sum(cost.values())
    while rest and total > budget:
        total -= cost[rest.pop(0)[0]]
    return [messages[i] for i in sorted(i for g in system + rest for i in g)]
