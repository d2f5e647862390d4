"""Compaction of one long task's active context, the pure part: what is counted, when a
compaction is due, which messages may be cleared and which are protected.

Messages are in the OpenAI chat format: ``system``, ``user``, ``assistant`` (with ``tool_calls``)
and ``tool`` results answering a call by its ``tool_call_id``. An assistant message with tool
calls and the results answering them form one *unit*, never split: every compaction keeps each
call paired with its result. A message may carry ``"pinned": true`` to be kept as it is.

What is protected from clearing: the most recent `keep_rounds` complete tool rounds (and
everything after the first of them), Skill reads and tool-discovery results (by the name of the
call they answer), pinned messages, system messages. The clearing draft and the summarised
segment are `dreamer.core.compaction.plan`'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dreamer.core.tokens import Counter, counter_named

Msg = dict[str, Any]

MESSAGES_TRIGGER = "messages"
TOKENS_TRIGGER = "tokens"


def _names(csv: str) -> frozenset[str]:
    return frozenset(n.strip() for n in csv.split(",") if n.strip())


@dataclass(frozen=True)
class Policy:
    """The thresholds of one compaction (from `Settings` by `policy_of`)."""

    max_messages: int = 200
    max_tokens: int = 20_000
    target_tokens: int = 10_000
    large_tokens: int = 200
    roles: frozenset[str] = frozenset({"tool"})
    keep_rounds: int = 3
    skill_tools: frozenset[str] = frozenset({"Skill", "read_skill"})
    discovery_tools: frozenset[str] = frozenset({"ToolSearch", "tool_search", "list_tools"})
    skill_budget: int = 4_000
    summary_tokens: int = 1_500  # the summary's reply budget: what a summary adds to its floor, at most
    tokenizer: str = "cl100k"  # what counts tokens (`dreamer.core.tokens.counter_named`)

    @property
    def counter(self) -> Counter:
        return counter_named(self.tokenizer)


def policy_of(settings: Any) -> Policy:
    """The policy the `compact_*` settings describe."""
    return Policy(
        max_messages=settings.compact_max_messages,
        max_tokens=settings.compact_max_tokens,
        target_tokens=settings.compact_target_tokens,
        large_tokens=settings.compact_large_tokens,
        roles=_names(settings.compact_roles) - {"system"},
        keep_rounds=settings.compact_keep_rounds,
        skill_tools=_names(settings.compact_skill_tools),
        discovery_tools=_names(settings.compact_discovery_tools),
        skill_budget=settings.compact_skill_budget,
        summary_tokens=settings.compact_summary_tokens,
        tokenizer=settings.compact_tokenizer,
    )


# --------------------------------------------------------------------------- counting


def text_of(message: Msg) -> str:
    """A message's content as text (a list of content parts joined by their text)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def calls_text(message: Msg) -> str:
    """A message's tool calls as the JSON the model reads ("" without any)."""
    calls = message.get("tool_calls")
    return json.dumps(calls, ensure_ascii=False, sort_keys=True) if calls else ""


def message_tokens(message: Msg, counter: Counter | None = None) -> int:
    """Tokens of a message's content and tool calls (cl100k unless `counter` says otherwise)."""
    count = counter or counter_named("cl100k")
    return count(text_of(message)) + count(calls_text(message))


def total_tokens(messages: Sequence[Msg], counter: Counter | None = None) -> int:
    """The one count of a context's tokens the API, MCP, the CLI and the eval all report."""
    count = counter or counter_named("cl100k")
    return sum(message_tokens(m, count) for m in messages)


def due(messages: Sequence[Msg], policy: Policy) -> str | None:
    """Which trigger makes a compaction due: ``messages`` (more than the limit), ``tokens``
    (more than the limit), or None."""
    if len(messages) > policy.max_messages:
        return MESSAGES_TRIGGER
    if total_tokens(messages, policy.counter) > policy.max_tokens:
        return TOKENS_TRIGGER
    return None


# --------------------------------------------------------------------------- structure


def call_ids(message: Msg) -> list[str]:
    """The ids of an assistant message's tool calls."""
    calls = message.get("tool_calls") or []
    return [str(c.get("id")) for c in calls if isinstance(c, dict) and c.get("id") is not None]


def units(messages: Sequence[Msg]) -> list[list[int]]:
    """The messages' indexes grouped into units: an assistant message with tool calls and the
    tool results after it answering them, or one message alone. Never split by a compaction."""
    out: list[list[int]] = []
    open_ids: set[str] = set()
    for i, m in enumerate(messages):
        if m.get("role") == "tool" and out and str(m.get("tool_call_id")) in open_ids:
            out[-1].append(i)
            continue
        out.append([i])
        open_ids = set(call_ids(m)) if m.get("role") == "assistant" else set()
    return out


def tool_names(messages: Sequence[Msg]) -> dict[str, str]:
    """The function name of each tool call, by call id."""
    names: dict[str, str] = {}
    for m in messages:
        for c in m.get("tool_calls") or []:
            if isinstance(c, dict) and c.get("id") is not None:
                names[str(c["id"])] = str((c.get("function") or {}).get("name", ""))
    return names


def recent_start(messages: Sequence[Msg], keep_rounds: int) -> int:
    """The index from which the most recent `keep_rounds` tool rounds run (to the end): the
    start of the `keep_rounds`-th last unit holding tool calls; the end when none is kept."""
    if keep_rounds <= 0:
        return len(messages)
    rounds = [u[0] for u in units(messages) if call_ids(messages[u[0]])]
    if not rounds:
        return len(messages)
    return rounds[-min(keep_rounds, len(rounds))]


@dataclass(frozen=True)
class Shape:
    """What a compaction needs to know of the messages: whose results are Skill reads or
    discovery, and where the protected recent rounds start."""

    names: dict[str, str]
    recent: int

    def tool_of(self, message: Msg) -> str:
        return self.names.get(str(message.get("tool_call_id")), "") if message.get("role") == "tool" else ""


def shape_of(messages: Sequence[Msg], policy: Policy) -> Shape:
    return Shape(tool_names(messages), recent_start(messages, policy.keep_rounds))


def protected(index: int, message: Msg, shape: Shape, policy: Policy) -> bool:
    """Whether clearing must leave the message as it is."""
    tool = shape.tool_of(message)
    return (
        index >= shape.recent
        or message.get("role") == "system"
        or bool(message.get("pinned"))
        or tool in policy.skill_tools
        or tool in policy.discovery_tools
    )


def eligible(index: int, message: Msg, shape: Shape, policy: Policy) -> bool:
    """Whether clearing may offload the message's body: a role the filter lets through, at least
    `large_tokens` of content, not protected, not already a marker."""
    text = text_of(message)
    return (
        message.get("role") in policy.roles
        and not protected(index, message, shape, policy)
        and not is_marker(text)
        and policy.counter(text) >= max(policy.large_tokens, 1)
    )


# --------------------------------------------------------------------------- markers

MARKER_PREFIX = "[tool output offloaded: "


def token_figure(tokens: int) -> str:
    """18234 -> "18.2k", 950 -> "950"."""
    return f"{tokens / 1000:.1f}k" if tokens >= 1000 else str(tokens)


def marker(offload_id: str, tokens: int) -> str:
    """The text that stands for an offloaded body."""
    return f"{MARKER_PREFIX}{token_figure(tokens)} tokens, id {offload_id}; restore_offloaded to read it]"


def is_marker(text: str) -> bool:
    return text.startswith(MARKER_PREFIX) and text.endswith("restore_offloaded to read it]")
