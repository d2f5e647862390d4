"""Compacting an agent's active context (the Python API behind `POST /v1/context/compact`, the
`compact_context` MCP tool and `dreamer eval compaction`).

First the daily-note flush where one is due (what is cleared was flushed), then the pure
decision of `dreamer.core.compaction.decide`: clearing alone when it fits, with no model call;
else the newest turns that fit are kept verbatim and the older span offloaded whole, summarised
with the `compact` card when a model gives a summary that fits. The bodies taken out are stored
(`dreamer.store.offloads`) and come back by their marker's id (`restore_offloaded`). Nothing
comes back over the budget unless the pinned part alone is (``over``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dreamer.core.compaction.decide import Decision, decide
from dreamer.core.compaction.fill import Segment, assemble, fill, named, summary_span, top_up
from dreamer.core.compaction.plan import CompactionPath, Offload, describe, new_offload_id
from dreamer.core.compaction.policy import Msg, Policy, policy_of, tool_names, total_tokens
from dreamer.core.errors import NotFound
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.llm.client import LLM
from dreamer.online.compaction.summary import Summary, summarise
from dreamer.online.flush.notes import flush_session
from dreamer.online.flush.trigger import flush_trigger, read_meter
from dreamer.online.session_append import own_session_id
from dreamer.store.offloads import read_offload, save_offloads

log = logging.getLogger(__name__)


class BilledTokens:
    """The tokens this process's summary calls were billed, for `/metrics` (API and MCP alike)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.prompt = 0
        self.completion = 0

    def add(self, prompt: int, completion: int) -> None:
        with self._lock:
            self.prompt += prompt
            self.completion += completion


BILLED = BilledTokens()


@dataclass
class Compacted:
    """A compaction's outcome: the new active segment, which input messages it summarised,
    offloaded and kept verbatim, and what it cost (tokens counted by `counter`)."""

    path: CompactionPath | str
    trigger: str | None
    messages: list[Msg]
    tokens_before: int
    tokens_after: int
    budget: int
    fits: bool
    model_calls: int = 0
    offloads: list[Offload] = field(default_factory=list)
    dropped: str = ""
    reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    flushed: str | None = None
    covers: dict[str, Any] | None = None
    pinned_tokens: int | None = None
    counter: str = ""

    @property
    def budget_use(self) -> float:
        return round(self.tokens_after / max(self.budget, 1), 4)

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["offloaded"] = [
            {"id": o.id, "role": o.role, "tool": o.tool, "tool_call_id": o.tool_call_id, "tokens": o.tokens}
            for o in self.offloads
        ]
        data["budget_use"] = self.budget_use
        del data["offloads"]
        return data


def compact_messages(
    settings: Settings,
    llm: LLM | None,
    messages: Sequence[Msg],
    *,
    budget: int | None = None,
    env_state: str | None = None,
    new_id: Callable[[], str] = new_offload_id,
) -> Compacted:
    """The compaction of `messages`, stored nowhere (the caller keeps the offloads)."""
    policy = policy_of(settings)
    d = decide(messages, policy, budget, new_id, env_state)
    if d.path == CompactionPath.UNCHANGED:
        return _result(policy, d, list(messages), reason="nothing to compact: the context already fits")
    if d.path == CompactionPath.CLEAR and d.draft is not None:
        return _result(policy, d, d.draft.messages, d.draft.offloads, dropped=describe(d.draft.offloads))
    if d.path == CompactionPath.CLEAR and d.segment is not None:
        seg = d.segment
        return _result(policy, d, seg.messages, seg.offloads, dropped=describe(seg.offloads), segment=seg)
    if d.path == CompactionPath.OVER and d.segment is not None:
        reason = (
            f"the pinned part (system prompt, pinned messages, the last turn) is {d.pinned_tokens} tokens, "
            f"over the budget of {d.budget}: every other message is offloaded"
        )
        return _result(policy, d, d.segment.messages, d.segment.offloads, reason=reason, segment=d.segment)
    return _filled(settings, llm, d)


def _filled(settings: Settings, llm: LLM | None, d: Decision) -> Compacted:
    """The budget filled newest first; the older span summarised when a model gives a summary
    that fits, else offloaded whole without one."""
    assert d.layout is not None
    layout, policy = d.layout, policy_of(settings)
    least = total_tokens(assemble(layout, {}, None, False).messages, policy.counter)
    reply = min(settings.compact_summary_tokens, (d.budget - least) // 3)
    found = None
    if llm is not None and reply >= MIN_REPLY:
        span = summary_span(layout, d.budget, reply)
        found = summarise(llm, span, tool_names(layout.messages), settings.tool_result_chars, reply)
    seg = fill(layout, d.budget, found.text) if found is not None and found.text else None
    calls, usage = (found.calls, (found.usage.prompt_tokens, found.usage.completion_tokens)) if found else (0, (0, 0))
    if seg is not None and found is not None:
        path: CompactionPath = CompactionPath.SUMMARY
        dropped, reason = found.dropped, None
    else:
        seg = fill(layout, d.budget)
        assert seg is not None  # the least segment fits, or the path is `over`
        path, dropped, reason = CompactionPath.OFFLOAD, "", _why_no_summary(llm, reply, found)
    return _result(
        policy,
        d,
        seg.messages,
        seg.offloads,
        calls=calls,
        usage=usage,
        dropped=dropped,
        reason=reason,
        path=path,
        segment=seg,
    )


TOPPED_UP = (CompactionPath.CLEAR, CompactionPath.SUMMARY, CompactionPath.OFFLOAD)
MIN_REPLY = 64  # fewer tokens than this left for a summary: the older span is offloaded without one


def _why_no_summary(llm: LLM | None, reply: int, found: Summary | None) -> str:
    if llm is None:
        return "no model is configured to summarise with: the older messages are offloaded whole"
    if found is None:
        return f"only {max(reply, 0)} tokens were left for a summary: the older messages are offloaded whole"
    if found.text is None:
        return f"{found.problem}: the older messages are offloaded whole"
    return "the summary was too long to fit beside the pinned part: the older messages are offloaded whole"


def _result(
    policy: Policy,
    d: Decision,
    messages: list[Msg],
    offloads: list[Offload] | None = None,
    *,
    calls: int = 0,
    usage: tuple[int, int] = (0, 0),
    dropped: str = "",
    reason: str | None = None,
    path: CompactionPath | None = None,
    segment: Segment | None = None,
) -> Compacted:
    if (path or d.path) in TOPPED_UP:
        topped = top_up(messages, offloads or [], d.budget, policy)
        if total_tokens(topped, policy.counter) <= d.budget:  # a cut's tokens may merge otherwise
            messages = topped
        offloads = named(messages, offloads or [])
    after = total_tokens(messages, policy.counter)
    return Compacted(
        path or d.path,
        d.trigger,
        messages,
        d.tokens_before,
        after,
        d.budget,
        after <= d.budget,
        calls,
        offloads or [],
        dropped,
        reason,
        *usage,
        covers=segment.covers() if segment else None,
        pinned_tokens=d.pinned_tokens if d.layout is not None else None,
        counter=policy.counter.name,
    )


def compact_context(
    rt: Runtime,
    scope: Scope,
    messages: Sequence[Msg],
    *,
    budget: int | None = None,
    env_state: str | None = None,
    session_id: str | None = None,
) -> Compacted:
    """Compact an agent's active context in its scope: the session's due flush first, then the
    compaction; the offloaded bodies stored (redacted) before the answer returns."""
    flushed = _flush_if_due(rt, scope, session_id)
    result = compact_messages(rt.settings, rt.llm, messages, budget=budget, env_state=env_state)
    if result.offloads:
        save_offloads(rt.engine, scope, result.offloads, session_id=session_id, raw=rt.settings.store_raw_messages)
    result.flushed = flushed
    BILLED.add(result.prompt_tokens, result.completion_tokens)
    log.info(
        "compaction (%s): %s, %d -> %d tokens, %d offloaded",
        result.trigger,
        result.path,
        result.tokens_before,
        result.tokens_after,
        len(result.offloads),
    )
    return result


def _flush_if_due(rt: Runtime, scope: Scope, session_id: str | None) -> str | None:
    """The daily-note flush of the recorded session, when one is due; its status, or None."""
    if session_id is None:
        return None
    try:
        sid = own_session_id(rt, scope, session_id)
    except NotFound:
        return None  # not recorded here: nothing to flush
    meter = read_meter(rt, sid)
    trigger = flush_trigger(meter.tokens, meter.messages_since_flush, meter.cycle_flushed, rt.settings)
    return flush_session(rt, sid, trigger=trigger).status if trigger else None


def restore_offloaded(rt: Runtime, scope: Scope, offload_id: str) -> dict[str, Any]:
    """An offloaded body by its marker's id, in the caller's scope (NotFound otherwise)."""
    row = read_offload(rt.engine, scope, offload_id)
    return {
        "id": row.id,
        "role": row.role,
        "tool": row.tool,
        "tool_call_id": row.tool_call_id,
        "tokens": row.tokens,
        "session_id": row.session_id,
        "content": row.body,
        "created_at": row.created_at.isoformat(),
    }
