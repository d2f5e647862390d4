"""Filling the budget newest first, pure: when clearing old tool output is not enough, the newest
turns that fit are kept verbatim, and the older span that does not fit is replaced by one message
(a summary the caller got from the model, or none) carrying the marker of that span, whose
messages are offloaded whole and come back as they were.

A *turn* is a unit of `policy.units`: an assistant message with its tool results, or one message
alone. The *pinned part* is never offloaded: system messages, units holding a ``"pinned": true``
message, the last unit, and the caller's environment state. When even the pinned part is over
the budget, the answer is `over`: every other turn is offloaded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from dreamer.core.compaction.plan import SUMMARY_HEAD, Offload, clearing_draft, found_names
from dreamer.core.compaction.policy import (
    Msg,
    Policy,
    is_marker,
    shape_of,
    text_of,
    token_figure,
    total_tokens,
    units,
)

TURNS_PREFIX = "[messages "


@dataclass(frozen=True)
class Turn:
    """One unit: where it was, its forms in order of preference (verbatim, then with its tool
    output cleared), and whether it is pinned."""

    indexes: tuple[int, ...]
    forms: tuple[tuple[Msg, ...], ...]
    pinned: bool


@dataclass(frozen=True)
class Layout:
    """What a fill works on: the input, its turns, the clearing offloads a form may use, the id
    the offloaded span takes, and the environment state carried at the end."""

    messages: list[Msg]
    turns: list[Turn]
    offloads: list[Offload]
    span_id: str
    policy: Policy
    env_state: str | None = None

    @property
    def candidates(self) -> list[Turn]:
        return [t for t in self.turns if not t.pinned]


@dataclass
class Segment:
    """A filled segment: its messages, the offloads its markers name, and which input messages
    (1-based, inclusive) the summary covers, went out whole, and stay verbatim."""

    messages: list[Msg]
    offloads: list[Offload]
    summary: tuple[int, int] | None
    offloaded: tuple[int, int] | None
    verbatim_from: int | None

    def covers(self) -> dict[str, list[int] | int | None]:
        return {
            "summary": list(self.summary) if self.summary else None,
            "offloaded": list(self.offloaded) if self.offloaded else None,
            "verbatim_from": self.verbatim_from,
        }


def layout_of(
    messages: Sequence[Msg], policy: Policy, new_id: Callable[[], str], env_state: str | None = None
) -> Layout:
    """The turns of `messages` in their forms: verbatim, and with their tool output cleared (old
    tool output is cleared first, as clearing does; the recent rounds' too when need be)."""
    msgs = [dict(m) for m in messages]
    old = clearing_draft(msgs, policy, None, new_id)
    every = clearing_draft(msgs, replace(policy, keep_rounds=0), None, new_id)
    recent = shape_of(msgs, policy).recent
    groups = units(msgs)
    turns = []
    for k, group in enumerate(groups):
        pinned = k == len(groups) - 1 or any(msgs[i].get("role") == "system" or msgs[i].get("pinned") for i in group)
        if pinned:
            forms: list[tuple[Msg, ...]] = [tuple(msgs[i] for i in group)]
        else:
            forms = [tuple(old.messages[i] for i in group)]
            cleared = tuple(every.messages[i] for i in group)
            if group[0] >= recent and cleared != forms[0]:
                forms.append(cleared)
        turns.append(Turn(tuple(group), tuple(forms), pinned))
    return Layout(msgs, turns, old.offloads + every.offloads, new_id(), policy, env_state)


def span_marker(offload_id: str, first: int, last: int, tokens: int) -> str:
    """The text that stands for a span of whole messages offloaded."""
    return (
        f"{TURNS_PREFIX}{first}-{last} offloaded: {token_figure(tokens)} tokens, id {offload_id}; "
        "restore_offloaded to read them]"
    )


def assemble(layout: Layout, tail: dict[int, int], summary: str | None, extras: bool) -> Segment:
    """The segment with the candidate turns in `tail` (position -> form) verbatim, the other
    candidates offloaded as one span (and summarised when `summary` is given), the pinned turns as
    they are; then, with `extras`, the Skills read and tools discovered in the span; then the
    environment state."""
    cands = layout.candidates
    older = [t for k, t in enumerate(cands) if k not in tail]
    span = (older[0].indexes[0] + 1, _last(older)) if older else None
    offloaded = _span(layout, older)
    out: list[Msg] = []
    k = 0
    for turn in layout.turns:
        if turn.pinned:
            out += [dict(m) for m in turn.forms[0]]
            continue
        if k in tail:
            out += [dict(m) for m in turn.forms[tail[k]]]
        elif turn is older[0] and offloaded is not None and span is not None:
            out.append({"role": "user", "content": _span_text(offloaded, span, summary)})
        k += 1
    if extras and older:
        out += [{"role": "user", "content": e} for e in _extras(layout, older) if e]
    if layout.env_state and layout.env_state.strip():
        out.append({"role": "user", "content": f"Environment now:\n{layout.env_state.strip()}"})
    shown = "\n".join(text_of(m) for m in out)
    used = [o for o in layout.offloads if o.id in shown]
    kept_from = min((t.indexes[0] + 1 for k, t in enumerate(cands) if k in tail), default=None)
    return Segment(
        out,
        used + ([offloaded] if offloaded else []),
        span if summary else None,
        span,
        kept_from,
    )


def _last(turns: Sequence[Turn]) -> int:
    return turns[-1].indexes[-1] + 1


def _span(layout: Layout, older: Sequence[Turn]) -> Offload | None:
    """The offload of the older turns, whole: their messages as they were, as JSON."""
    if not older:
        return None
    body = json.dumps([layout.messages[i] for t in older for i in t.indexes], ensure_ascii=False)
    return Offload(layout.span_id, older[0].indexes[0], "turns", "", None, body, layout.policy.counter(body))


def _span_text(offload: Offload, span: tuple[int, int], summary: str | None) -> str:
    first, last = span
    mark = span_marker(offload.id, first, last, offload.tokens)
    if summary is None:
        return mark
    return f"{SUMMARY_HEAD} messages {first}-{last}\n{summary.strip()}\nThose messages, as they were: {mark}"


def _extras(layout: Layout, older: Sequence[Turn]) -> list[str]:
    """The Skills read in the offloaded span (newest first, within `skill_budget`) and the names of
    the tools its discovery calls found."""
    policy = layout.policy
    shape = shape_of(layout.messages, policy)
    msgs = [layout.messages[i] for t in older for i in t.indexes]
    skills: list[str] = []
    left = policy.skill_budget
    for m in reversed(msgs):
        if shape.tool_of(m) in policy.skill_tools and policy.counter(text_of(m)) <= left:
            skills.insert(0, text_of(m))
            left -= policy.counter(text_of(m))
    names: list[str] = []
    asked = ""
    for m in msgs:
        if shape.tool_of(m) in policy.discovery_tools:
            asked = shape.tool_of(m)
            names += [n for n in found_names(text_of(m)) if n not in names]
    out = ["Skills read before the compaction:\n\n" + "\n\n".join(skills) if skills else ""]
    if names:
        out.append(
            f"Tools discovered before the compaction: {', '.join(names)} (names only: call {asked} again for a schema)"
        )
    return out


def _fits(messages: Sequence[Msg], goal: int, policy: Policy) -> bool:
    return total_tokens(messages, policy.counter) <= goal and len(messages) <= policy.max_messages


def fill(layout: Layout, goal: int, summary: str | None = None) -> Segment | None:
    """The newest turns that fit `goal` with the rest offloaded (and summarised when `summary` is
    given): first with the Skills and tools of the span carried, then without; None when not even
    the span's message fits beside the pinned part."""
    for extras in (True, False):
        found = _newest_first(layout, goal, summary, extras)
        if found is not None:
            return found
    return None


def _newest_first(layout: Layout, goal: int, summary: str | None, extras: bool) -> Segment | None:
    policy = layout.policy
    base = assemble(layout, {}, summary, extras)
    if not _fits(base.messages, goal, policy):
        return None
    used, count = total_tokens(base.messages, policy.counter), len(base.messages)
    tail: dict[int, int] = {}
    for k in reversed(range(len(layout.candidates))):
        smallest = layout.candidates[k].forms[-1]  # the room left is given back newest first by `top_up`
        cost = total_tokens(smallest, policy.counter)
        if used + cost > goal or count + len(smallest) > policy.max_messages:
            break
        tail[k] = len(layout.candidates[k].forms) - 1
        used, count = used + cost, count + len(smallest)
    seg = assemble(layout, tail, summary, extras)
    while tail and not _fits(seg.messages, goal, policy):  # a marker's figures may have grown a token
        del tail[min(tail)]
        seg = assemble(layout, tail, summary, extras)
    return seg


def summary_span(layout: Layout, goal: int, reply_tokens: int) -> list[Msg]:
    """The messages a summary replaces: those of the turns that do not fit `goal` less the
    summary's `reply_tokens`, newest kept first."""
    planned = fill(layout, max(goal - reply_tokens, 1)) or assemble(layout, {}, None, False)
    first = planned.verbatim_from or len(layout.messages) + 1
    return [m for t in layout.candidates if t.indexes[0] + 1 < first for m in (layout.messages[i] for i in t.indexes)]


def pinned_tokens(layout: Layout) -> int:
    """Tokens of the pinned part: what no compaction offloads."""
    pinned = [m for t in layout.turns if t.pinned for m in t.forms[0]]
    env = layout.env_state.strip() if layout.env_state else ""
    return total_tokens(pinned, layout.policy.counter) + (
        layout.policy.counter(f"Environment now:\n{env}") if env else 0
    )


PREVIEW = "\nIts first part:\n"
MIN_PREVIEW = 32  # fewer tokens of room than this: no part of a body is put back


def top_up(messages: Sequence[Msg], offloads: Sequence[Offload], goal: int, policy: Policy) -> list[Msg]:
    """The room left under `goal` used again, newest first: each tool output marker whose body
    fits is its body again; the first that does not fit keeps its marker with as much of its body's
    start as fits; room still left shows the end of the offloaded span after its marker. The
    markers that stay still name their offloads."""
    out = [dict(m) for m in messages]
    bodies = {o.id: o for o in offloads if o.role != "turns"}
    room = goal - total_tokens(out, policy.counter)
    for i in reversed(range(len(out))):
        found = _offload_named(text_of(out[i]), bodies)
        if room < MIN_PREVIEW:
            break
        if found is None:
            continue
        mark = text_of(out[i])
        if found.tokens - policy.counter(mark) <= room:
            out[i] = {**out[i], "content": found.body}
            room -= found.tokens - policy.counter(mark)
            continue
        head = _head(found.body, room - policy.counter(mark + PREVIEW) - 2, policy)
        if head:
            out[i] = {**out[i], "content": mark + PREVIEW + head}
        return out
    return _span_tail(out, offloads, room, policy)


SPAN_TAIL = "\nIts last part:\n"


def _span_tail(messages: list[Msg], offloads: Sequence[Offload], room: int, policy: Policy) -> list[Msg]:
    """With room still left, the end of the offloaded span's messages after its marker: the
    newest of what went out, as much as fits."""
    span = next((o for o in offloads if o.role == "turns"), None)
    at = next((i for i, m in enumerate(messages) if span is not None and f"id {span.id};" in text_of(m)), None)
    if span is None or at is None or room < MIN_PREVIEW:
        return messages
    said = "\n".join(f"{m.get('role')}: {text_of(m)}" for m in json.loads(span.body) if text_of(m).strip())
    tail = _tail(said, room - policy.counter(SPAN_TAIL) - 2, policy)
    if tail:
        messages[at] = {**messages[at], "content": text_of(messages[at]) + SPAN_TAIL + tail}
    return messages


def _fitting(text: str, tokens: int, policy: Policy, *, end: bool) -> str:
    """The longest start (or, with `end`, end) of `text` within `tokens`, found by halving."""
    if tokens <= 0:
        return ""
    low, high = 0, min(len(text), tokens * 8)
    while low < high:
        mid = (low + high + 1) // 2
        if policy.counter(text[len(text) - mid :] if end else text[:mid]) <= tokens:
            low = mid
        else:
            high = mid - 1
    return text[len(text) - low :] if end else text[:low]


def _tail(text: str, tokens: int, policy: Policy) -> str:
    """The longest end of `text` (cut at a line or a space) within `tokens`."""
    cut = _fitting(text, tokens, policy, end=True)
    edge = max(cut.find("\n"), cut.find(" "))
    return cut[edge + 1 :] if 0 <= edge < len(cut) // 2 else cut


def _offload_named(text: str, bodies: dict[str, Offload]) -> Offload | None:
    if not is_marker(text):
        return None
    return next((o for oid, o in bodies.items() if f"id {oid};" in text), None)


def _head(body: str, tokens: int, policy: Policy) -> str:
    """The longest start of `body` (cut at a line or a space) within `tokens`."""
    cut = _fitting(body, tokens, policy, end=False)
    edge = max(cut.rfind("\n"), cut.rfind(" "))
    return cut[:edge] if edge > len(cut) // 2 else cut


def named(messages: Sequence[Msg], offloads: Sequence[Offload]) -> list[Offload]:
    """The offloads whose marker is in `messages`: those a restore may be asked for."""
    shown = "\n".join(text_of(m) for m in messages)
    return [o for o in offloads if f"id {o.id};" in shown]
