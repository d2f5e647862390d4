"""Compaction decided, pure: the clearing draft (old eligible bodies replaced by markers, oldest
first, until the context fits), whether to keep it or discard it and summarise, and the
summarised segment built around a summary the caller got from the model.

Nothing here calls a model, reads a clock or touches storage: ids of offloaded bodies come from
the `new_id` the caller hands in.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from dreamer.core.compaction.policy import (
    Msg,
    Policy,
    Shape,
    due,
    eligible,
    marker,
    shape_of,
    text_of,
    token_figure,
    total_tokens,
    units,
)
from dreamer.core.secrets.redact import clean_for_model, clean_prefix
from dreamer.core.tokens import count_tokens


class CompactionPath(StrEnum):
    """What a compaction does (`Decision`); its value is what the answer's `path` says."""

    UNCHANGED = "unchanged"
    CLEAR = "clear"
    SUMMARY = "summary"


SUMMARY_HEAD = "Summary of the earlier part of this task (compacted):"


def new_offload_id() -> str:
    return "ofl_" + secrets.token_hex(10)


@dataclass(frozen=True)
class Offload:
    """One body taken out of the active context, and where it was."""

    id: str
    index: int
    role: str
    tool: str
    tool_call_id: str | None
    body: str
    tokens: int


@dataclass
class Draft:
    messages: list[Msg]
    offloads: list[Offload] = field(default_factory=list)


@dataclass
class Decision:
    """What a compaction does: ``unchanged`` (nothing due, or it already fits), ``clear`` (the
    draft is the new segment, no model call; over the budget, with a `note`, when not even a
    summary could fit) or ``summary`` (the draft was discarded)."""

    path: CompactionPath
    trigger: str | None
    budget: int
    tokens_before: int
    draft: Draft | None = None
    shape: Shape | None = None
    note: str | None = None  # why a ``clear`` draft is kept over the budget


def fits(messages: Sequence[Msg], budget: int, policy: Policy) -> bool:
    return total_tokens(messages) <= budget and len(messages) <= policy.max_messages


def clearing_draft(
    messages: Sequence[Msg], policy: Policy, budget: int | None, new_id: Callable[[], str] = new_offload_id
) -> Draft:
    """Eligible bodies replaced by markers, oldest first, until the tokens fit `budget` (every
    eligible body when `budget` is None). Calls and results stay where they were, paired."""
    shape = shape_of(messages, policy)
    out = [dict(m) for m in messages]
    offloads: list[Offload] = []
    total = total_tokens(messages)
    for i, m in enumerate(messages):
        if budget is not None and total <= budget:
            break
        if not eligible(i, m, shape, policy):
            continue
        body = text_of(m)
        tokens = count_tokens(body)
        oid = new_id()
        out[i] = {**m, "content": marker(oid, tokens)}
        total += count_tokens(out[i]["content"]) - tokens
        call_id = m.get("tool_call_id")
        offloads.append(
            Offload(
                oid, i, str(m.get("role")), shape.tool_of(m), None if call_id is None else str(call_id), body, tokens
            )
        )
    return Draft(out, offloads)


def decide(
    messages: Sequence[Msg],
    policy: Policy,
    budget: int | None = None,
    new_id: Callable[[], str] = new_offload_id,
) -> Decision:
    """Clear first; keep the draft when it fits, else discard it: the caller summarises. When
    what a summary keeps verbatim (system rules, pinned messages, the protected recent rounds)
    is alone over the budget, no summary can fit; if the draft is then within a summary's reply
    budget of that floor, a summary could save little: the draft is kept, losing nothing and
    asking no model."""
    goal = policy.target_tokens if budget is None else budget
    before = total_tokens(messages)
    trigger = due(messages, policy)
    if trigger is None and budget is not None and before > budget:
        trigger = "budget"
    if trigger is None or fits(messages, goal, policy):
        return Decision(CompactionPath.UNCHANGED, trigger, goal, before)
    draft = clearing_draft(messages, policy, goal, new_id)
    if draft.offloads and fits(draft.messages, goal, policy):
        return Decision(CompactionPath.CLEAR, trigger, goal, before, draft)
    floor = summary_floor(messages, policy)
    if draft.offloads and floor > goal and total_tokens(draft.messages) <= floor + policy.summary_tokens:
        note = f"what a summary keeps verbatim is {floor} tokens, over the budget of {goal}: cleared, not summarised"
        return Decision(CompactionPath.CLEAR, trigger, goal, before, draft, note=note)
    return Decision(CompactionPath.SUMMARY, trigger, goal, before, None, shape_of(messages, policy))


def summary_floor(messages: Sequence[Msg], policy: Policy) -> int:
    """The tokens of the smallest segment a summary could give: an empty summary beside what it
    keeps verbatim."""
    return total_tokens(summary_segment(messages, policy, ""))


# --------------------------------------------------------------------------- the summary step


def earlier_part(messages: Sequence[Msg], shape: Shape) -> list[Msg]:
    """What a summary covers: the messages before the protected recent rounds, system rules aside."""
    return [m for m in messages[: shape.recent] if m.get("role") != "system"]


def history_entries(messages: Sequence[Msg], names: dict[str, str], tool_chars: int) -> list[str]:
    """The messages as numbered entries for the summary call: secrets redacted, injected memory
    blocks stripped, tool results cut to `tool_chars` characters."""
    lines = []
    for i, m in enumerate(messages, 1):
        role = str(m.get("role"))
        text = text_of(m)
        if role == "tool":
            name = names.get(str(m.get("tool_call_id")), "tool")
            lines.append(f"[{i}] tool {name} ({m.get('tool_call_id')}): {clean_prefix(text, tool_chars)}")
            continue
        said = clean_for_model(text).strip()
        calls = [_call_line(c) for c in m.get("tool_calls") or [] if isinstance(c, dict)]
        lines.append(f"[{i}] {role}: {said}" + "".join(f"\n    calls {c}" for c in calls))
    return lines


def fit_entries(entries: Sequence[str], room: int) -> list[str]:
    """The entries that fit `room` tokens: the first (the task as set) and the latest after it."""
    if not entries:
        return []
    kept = [entries[0]]
    left = room - count_tokens(entries[0])
    tail: list[str] = []
    for entry in reversed(entries[1:]):
        cost = count_tokens(entry) + 1
        if cost > left:
            break
        tail.insert(0, entry)
        left -= cost
    return kept + tail


def _call_line(call: dict[str, Any]) -> str:
    fn = call.get("function") or {}
    return f"{fn.get('name', '?')}({clean_for_model(str(fn.get('arguments', '')))}) id {call.get('id')}"


def summary_segment(
    messages: Sequence[Msg],
    policy: Policy,
    summary: str,
    offloads: Sequence[Offload] = (),
    env_state: str | None = None,
) -> list[Msg]:
    """The new active segment: system rules, the summary (with the markers of the earlier bodies
    offloaded), the pinned messages, the recent rounds verbatim, then the Skills read (within `skill_budget`), the
    names of the tools discovered with how to query them again, and the fresh environment state."""
    shape = shape_of(messages, policy)
    head = [dict(m) for m in messages[: shape.recent] if m.get("role") == "system"]
    text = f"{SUMMARY_HEAD}\n{summary.strip()}"
    if offloads:
        listed = "\n".join(f"- {o.tool or o.role} {marker(o.id, o.tokens)}" for o in offloads)
        text += f"\nTool output kept out of the context (restore_offloaded with its id):\n{listed}"
    out = [*head, {"role": "user", "content": text}, *_pinned(messages, shape.recent)]
    out += [dict(m) for m in messages[shape.recent :]]
    extra = [_skills(messages, shape, policy), _discovered(messages, shape, policy)]
    if env_state and env_state.strip():
        extra.append(f"Environment now:\n{env_state.strip()}")
    out += [{"role": "user", "content": e} for e in extra if e]
    return out


def _pinned(messages: Sequence[Msg], recent: int) -> list[Msg]:
    """The pinned messages of the earlier part, verbatim, each with the rest of its unit (a
    pinned call keeps its results, a pinned result its call)."""
    earlier = messages[:recent]
    kept = [
        u for u in units(earlier) if earlier[u[0]].get("role") != "system" and any(earlier[i].get("pinned") for i in u)
    ]
    return [dict(earlier[i]) for u in kept for i in u]


def _skills(messages: Sequence[Msg], shape: Shape, policy: Policy) -> str:
    """The Skills read before the recent rounds, newest first, as many as fit the budget."""
    kept: list[str] = []
    left = policy.skill_budget
    for m in reversed(messages[: shape.recent]):
        if shape.tool_of(m) in policy.skill_tools:
            body = text_of(m)
            cost = count_tokens(body)
            if cost <= left:
                kept.insert(0, body)
                left -= cost
    return "Skills read before the compaction:\n\n" + "\n\n".join(kept) if kept else ""


def _discovered(messages: Sequence[Msg], shape: Shape, policy: Policy) -> str:
    """The names of the tools found by discovery calls before the recent rounds (a name, not its schema)."""
    names: list[str] = []
    asked = ""
    for m in messages[: shape.recent]:
        tool = shape.tool_of(m)
        if tool in policy.discovery_tools:
            asked = tool
            names += [n for n in found_names(text_of(m)) if n not in names]
    if not names:
        return ""
    return f"Tools discovered before the compaction: {', '.join(names)} (names only: call {asked} again for a schema)"


def found_names(body: str) -> list[str]:
    """Tool names a discovery result lists: the ``name`` fields of its JSON, else each line's first word."""
    try:
        data = json.loads(body)
    except ValueError:
        return [w.split()[0].strip("-*:,") for w in body.splitlines() if w.split()]
    out: list[str] = []
    stack = [data]
    while stack:
        item = stack.pop(0)
        if isinstance(item, dict):
            if isinstance(item.get("name"), str):
                out.append(item["name"])
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
    return out


def describe(offloads: Sequence[Offload]) -> str:
    """What clearing dropped, in one line."""
    tokens = sum(o.tokens for o in offloads)
    return f"{len(offloads)} tool output(s), {token_figure(tokens)} tokens, offloaded"
