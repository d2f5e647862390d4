"""Compacting an agent's active context (the Python API behind `POST /v1/context/compact`, the
`compact_context` MCP tool and `dreamer eval compaction`).

First the daily-note flush where one is due (what is cleared was flushed), then the pure
decision of `dreamer.core.compaction.plan`: clearing alone when it fits, with no model call;
else the draft is discarded and the earlier part summarised with the `compact` card. The
bodies taken out are stored (`dreamer.store.offloads`) and come back by their marker's id
(`restore_offloaded`). An empty or failed summary leaves the segment as it was.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dreamer.core.compaction.plan import (
    CompactionPath,
    Decision,
    Offload,
    clearing_draft,
    decide,
    describe,
    earlier_part,
    new_offload_id,
    summary_segment,
)
from dreamer.core.compaction.policy import Msg, policy_of, total_tokens
from dreamer.core.errors import NotFound
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.llm.client import LLM
from dreamer.online.compaction.summary import summarise
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
    """A compaction's outcome: the new active segment and what it cost."""

    path: CompactionPath
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

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["offloaded"] = [
            {"id": o.id, "tool": o.tool, "tool_call_id": o.tool_call_id, "tokens": o.tokens} for o in self.offloads
        ]
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
    d = decide(messages, policy, budget, new_id)
    if d.path == CompactionPath.UNCHANGED:
        return _result(d, list(messages), reason="nothing to compact: the context already fits")
    if d.path == CompactionPath.CLEAR and d.draft is not None:
        return _result(d, d.draft.messages, d.draft.offloads, dropped=describe(d.draft.offloads), reason=d.note)
    return _summarised(settings, llm, messages, d, env_state, new_id)


def _summarised(
    settings: Settings,
    llm: LLM | None,
    messages: Sequence[Msg],
    d: Decision,
    env_state: str | None,
    new_id: Callable[[], str],
) -> Compacted:
    """The summary path: the earlier part summarised, its large bodies offloaded and listed."""
    policy = policy_of(settings)
    assert d.shape is not None
    earlier = earlier_part(messages, d.shape)
    if not earlier:
        return _result(
            d,
            list(messages),
            reason="nothing before the protected recent rounds to summarise",
            path=CompactionPath.UNCHANGED,
        )
    found = summarise(llm, earlier, d.shape.names, settings.tool_result_chars, settings.compact_summary_tokens)
    usage = (found.usage.prompt_tokens, found.usage.completion_tokens)
    if found.text is None:  # an empty or failed summary: the segment stays as it was
        return _result(
            d, list(messages), calls=found.calls, usage=usage, reason=found.problem, path=CompactionPath.UNCHANGED
        )
    offloads = clearing_draft(messages, policy, None, new_id).offloads  # all before the recent rounds
    segment = summary_segment(messages, policy, found.text, offloads, env_state)
    return _result(d, segment, offloads, calls=found.calls, usage=usage, dropped=found.dropped)


def _result(
    d: Decision,
    messages: list[Msg],
    offloads: list[Offload] | None = None,
    *,
    calls: int = 0,
    usage: tuple[int, int] = (0, 0),
    dropped: str = "",
    reason: str | None = None,
    path: CompactionPath | None = None,
) -> Compacted:
    after = total_tokens(messages)
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
    if result.offloads and result.path in (CompactionPath.CLEAR, CompactionPath.SUMMARY):
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
