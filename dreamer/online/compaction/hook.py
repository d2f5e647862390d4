"""What the Claude Code PreCompact hook records of the compaction about to happen: the stored
session read back as OpenAI-format messages, and every tool output the policy would clear kept
as an offloaded body (redacted, in the hook's scope), so `restore_offloaded` can give it back
after Claude Code's own compaction dropped it. A body recorded before is not recorded twice."""

from __future__ import annotations

import logging

from sqlmodel import col, select

from dreamer.core.compaction.plan import clearing_draft, describe
from dreamer.core.compaction.policy import Msg, policy_of
from dreamer.core.models import Message, OffloadedBody, Session
from dreamer.core.scope import Scope
from dreamer.engine.runtime import Runtime
from dreamer.store.db import session_scope
from dreamer.store.offloads import save_offloads

log = logging.getLogger(__name__)


def as_openai(m: Message) -> Msg:
    """A stored message in the OpenAI chat format (the importers keep calls as {id, name, arguments})."""
    out: Msg = {"role": m.role, "content": m.content}
    if m.tool_call_id:
        out["tool_call_id"] = m.tool_call_id
    calls = [c for c in m.tool_calls or [] if isinstance(c, dict)]
    if calls:
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name"), "arguments": c.get("arguments")},
            }
            for c in calls
        ]
    return out


def record_would_drop(rt: Runtime, scope: Scope, session: Session) -> int:
    """Offload what a compaction of the session would clear; how many bodies were new."""
    with session_scope(rt.engine) as s:
        rows = s.exec(select(Message).where(Message.session_id == session.id).order_by(col(Message.seq))).all()
        seen = set(
            s.exec(
                select(OffloadedBody.tool_call_id)
                .where(OffloadedBody.user_id == scope.user_id)
                .where(OffloadedBody.session_id == session.external_id)
            ).all()
        )
    draft = clearing_draft([as_openai(m) for m in rows], policy_of(rt.settings), None)
    new = [o for o in draft.offloads if o.tool_call_id is None or o.tool_call_id not in seen]
    if new:
        save_offloads(rt.engine, scope, new, session_id=session.external_id, raw=rt.settings.store_raw_messages)
    log.info("session %s: before compaction, %s", session.external_id, describe(new))
    return len(new)


__all__ = ["as_openai", "record_would_drop"]
