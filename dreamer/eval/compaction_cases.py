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

from dreamer.core.compaction.plan import SUMMARY_HEAD, Offload
from dreamer.core.compaction.policy import Msg, calls_text, text_of, total_tokens, units
from dreamer.core.errors import IngestError, validation_summary
from dreamer.core.tokens import Counter
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


PLACES = ("visible", "summary", "marker")  # where a kept fact is, the nearest first; else "lost"


def _shown(m: Msg) -> str:
    return f"{text_of(m)}\n{calls_text(m)}"


def restored_text(offload: Offload) -> str:
    """What restoring an offload gives the agent to read: the body, or the messages of a span."""
    if offload.role != "turns":
        return offload.body
    return "\n".join(_shown(m) for m in json.loads(offload.body))


def places_text(messages: Sequence[Msg], offloads: Sequence[Offload]) -> dict[str, str]:
    """Per place, lower case, what the agent can read: the segment but its summary (``visible``),
    the summary, and each offloaded body whose marker's id is in the segment (``marker``)."""
    summary = [m for m in messages if text_of(m).startswith(SUMMARY_HEAD)]
    shown = "\n".join(_shown(m) for m in messages if m not in summary)
    said = "\n".join(text_of(m) for m in summary)
    segment = shown + "\n" + said
    restorable = [restored_text(o) for o in offloads if o.id in segment]
    return {"visible": shown.lower(), "summary": said.lower(), "marker": "\n".join(restorable).lower()}


def where_kept(fact: Fact, texts: dict[str, str]) -> str:
    """The nearest place from which every string of the fact can be read, or ``lost``."""
    seen = ""
    for place in PLACES:
        seen += "\n" + texts[place]
        if all(s.lower() in seen for s in fact.must_contain):
            return place
    return "lost"


def fact_report(case: Case, messages: Sequence[Msg], offloads: Sequence[Offload]) -> list[dict[str, str]]:
    """Each planted fact, its kind, and where it was kept (or ``lost``)."""
    texts = places_text(messages, offloads)
    return [{"kind": f.kind, "fact": " / ".join(f.must_contain), "where": where_kept(f, texts)} for f in case.facts]


def facts_kept(case: Case, messages: Sequence[Msg], offloads: Sequence[Offload]) -> float:
    """The share of the case's facts whose every `must_contain` string the agent can still read."""
    found = fact_report(case, messages, offloads)
    return round(sum(f["where"] != "lost" for f in found) / len(found), 4)


def truncated(messages: Sequence[Msg], budget: int, counter: Counter | None = None) -> list[Msg]:
    """The truncation baseline: system messages kept, the oldest other units dropped (a call
    with its results) until the rest fits `budget`."""
    groups = units(messages)
    system = [g for g in groups if messages[g[0]].get("role") == "system"]
    rest = [g for g in groups if messages[g[0]].get("role") != "system"]
    cost = {g[0]: total_tokens([messages[i] for i in g], counter) for g in groups}
    total = sum(cost.values())
    while rest and total > budget:
        total -= cost[rest.pop(0)[0]]
    return [messages[i] for i in sorted(i for g in system + rest for i in g)]
