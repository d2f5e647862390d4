"""Compaction's parts, pure: the paths, the offloads, the clearing draft (old eligible bodies
replaced by markers, oldest first, until the context fits) and the history a summary call reads.

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
    eligible,
    marker,
    shape_of,
    text_of,
    token_figure,
    total_tokens,
)
from dreamer.core.secrets.redact import clean_for_model, clean_prefix
from dreamer.core.tokens import count_tokens


class CompactionPath(StrEnum):
    """What a compaction does (`Decision`); its value is what the answer's `path` says."""

    UNCHANGED = "unchanged"  # it already fits, or nothing is due
    CLEAR = "clear"  # old tool output offloaded, no model call
    SUMMARY = "summary"  # the older span summarised and offloaded whole, the newest turns verbatim
    OFFLOAD = "offload"  # the older span offloaded whole without a summary (no model, or none usable)
    OVER = "over"  # the pinned part alone is over the budget: everything else offloaded


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


def fits(messages: Sequence[Msg], budget: int, policy: Policy) -> bool:
    return total_tokens(messages, policy.counter) <= budget and len(messages) <= policy.max_messages


def clearing_draft(
    messages: Sequence[Msg], policy: Policy, budget: int | None, new_id: Callable[[], str] = new_offload_id
) -> Draft:
    """Eligible bodies replaced by markers, oldest first, until the tokens fit `budget` (every
    eligible body when `budget` is None). Calls and results stay where they were, paired."""
    shape = shape_of(messages, policy)
    count = policy.counter
    out = [dict(m) for m in messages]
    offloads: list[Offload] = []
    total = total_tokens(messages, count)
    for i, m in enumerate(messages):
        if budget is not None and total <= budget:
            break
        if not eligible(i, m, shape, policy):
            continue
        body = text_of(m)
        tokens = count(body)
        oid = new_id()
        out[i] = {**m, "content": marker(oid, tokens)}
        total += count(out[i]["content"]) - tokens
        call_id = m.get("tool_call_id")
        offloads.append(
            Offload(
                oid, i, str(m.get("role")), shape.tool_of(m), None if call_id is None else str(call_id), body, tokens
            )
        )
    return Draft(out, offloads)


# --------------------------------------------------------------------------- the summary step


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
