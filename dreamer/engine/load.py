"""A session's slice for the pass: its new messages after the cursor (with a little overlap
before it), read as transcript lines up to the per-pass token budget."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import tzinfo

from sqlmodel import col, select

from dreamer.core.days import local_day
from dreamer.core.models import Cursor, Message, Session
from dreamer.core.secrets.redact import clean_for_model, clean_prefix
from dreamer.core.tokens import count_tokens
from dreamer.engine.extraction.transcript import Line
from dreamer.engine.extraction.untrusted import message_steering
from dreamer.engine.runtime import Runtime
from dreamer.store.db import session_scope

LOAD_BATCH = 256  # messages fetched at a time while a session's new messages are read


@dataclass
class Work:
    """One session's slice for this pass."""

    session: Session
    processed_seq: int
    lines: list[Line]
    upto: int  # the cursor after this pass
    new_messages: int


def session_id(sess: Session) -> int:
    """The id of a stored session."""
    if sess.id is None:
        raise ValueError("the session is not stored")
    return sess.id


def load_work(rt: Runtime, sess: Session) -> Work | None:
    """New messages after the cursor (plus a little overlap), up to the per-pass token budget."""
    st = rt.settings
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, sess.id)
        if cursor is None or cursor.processed_seq >= sess.last_seq or cursor.status == "quarantined":
            return None
        start = max(1, cursor.processed_seq - st.overlap_messages + 1)
        rows = s.exec(  # streamed: a long session is read only as far as the budget goes
            select(Message)
            .where(Message.session_id == sess.id)
            .where(Message.seq >= start)
            .order_by(col(Message.seq))
            .execution_options(yield_per=LOAD_BATCH)
        )
        lines: list[Line] = []
        upto, new, spent, tz = cursor.processed_seq, 0, 0, st.tz
        for m in rows:
            line = _line(m, cursor.processed_seq, st.tool_result_chars, tz, sess.mode)
            cost = count_tokens(line.text)
            if not line.context_only and new and spent + cost > st.tokens_per_session_pass:
                break
            lines.append(line)
            if not line.context_only:
                spent, new, upto = spent + cost, new + 1, m.seq
        processed = cursor.processed_seq
    return Work(sess, processed, lines, upto, new) if new else None


def _line(m: Message, processed_seq: int, tool_chars: int, tz: tzinfo, mode: str) -> Line:
    text = clean_prefix(m.content, tool_chars) if m.role == "tool" else clean_for_model(m.content)
    steering = message_steering(m.content, m.role, mode, tool_chars)
    day = local_day(m.created_at, tz)
    return Line(
        m.seq, m.role, m.name, text, context_only=m.seq <= processed_seq, day=day, steering=steering, at=m.created_at
    )
