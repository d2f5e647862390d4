"""The daily-note flush of the online companion.

A flush makes one LLM call over a session's content since its last flush (the rules extractor
without an LLM), appends the notes to the day's daily note and adds them as ``daily_note``
memories. When one is due is `dreamer.online.flush.trigger`'s; the background runner is
`dreamer.online.flush.runner`'s.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from datetime import datetime, tzinfo
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.consolidate import content_hash, normalise
from dreamer.core.days import local_day
from dreamer.core.errors import NotFound
from dreamer.core.models import CURRENT_STATUSES, DailyNote, Memory, Message, Session, utcnow
from dreamer.core.secrets.redact import clean_for_model, clean_prefix
from dreamer.core.settings import Settings
from dreamer.core.trust.memory_text import stored_text
from dreamer.engine import outbox
from dreamer.engine.extraction.extract import Sentence
from dreamer.engine.extraction.transcript import Chunk, Line, chunk_lines, render_body
from dreamer.engine.extraction.untrusted import message_steering, untrusted_reason
from dreamer.engine.markdown import views as markdown
from dreamer.engine.rules.extractor import RulesExtractor
from dreamer.engine.runtime import Runtime
from dreamer.engine.shared_index import end_turn
from dreamer.llm.cards import render_card
from dreamer.llm.client import LLM, Usage
from dreamer.online.agent_writes import user_lock
from dreamer.online.flush.trigger import MANUAL, WINDOW_POSITION, Meter, flush_trigger, flushed_seq, read_meter
from dreamer.store import cabinet, gate
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)
NOTE_REPLY_TOKENS = 80  # tokens one daily note takes at most, written out
TRANSCRIPT_FRAME = 8  # the <transcript> tags around a flush's lines
MIN_WINDOW = 64  # transcript tokens a flush always carries

FLUSH_ROLES = ("user", "assistant", "tool")


class _RuntimeLLM(Enum):
    RUNTIME = "runtime"


RUNTIME_LLM = _RuntimeLLM.RUNTIME  # flush_session's default: the runtime's own LLM


class FlushNote(BaseModel):
    text: Sentence = Field(description="one sentence that stands alone, naming its subject")
    seqs: list[int] = Field(default_factory=list, description="the [n] of the lines it rests on")


class FlushNotes(BaseModel):
    notes: list[FlushNote] = Field(default_factory=list, description="today's notes worth keeping")


def flush_prompt(limit: int) -> str:
    """The system prompt of a flush call: the flush card, asking for at most `limit` notes."""
    return render_card("flush", FlushNotes, limit=limit)


@dataclass
class Window:
    """The stretch of a session a flush covers: messages `start`..`end`."""

    session: Session
    session_id: int
    start: int
    end: int
    lines: list[Line]
    cycle: int
    trigger: str


@dataclass
class FlushResult:
    session_id: int
    status: str  # flushed | nothing_new | already_flushed | deferred
    trigger: str | None = None
    window: tuple[int, int] | None = None
    notes: list[str] = field(default_factory=list)
    memory_ids: list[str] = field(default_factory=list)
    extractor: str = ""
    day: str | None = None
    path: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["window"] = list(self.window) if self.window else None
        return data


def flush_session(
    rt: Runtime,
    session_id: int,
    *,
    trigger: str | None = None,
    now: datetime | None = None,
    llm: LLM | None | Literal[_RuntimeLLM.RUNTIME] = RUNTIME_LLM,
) -> FlushResult:
    """Flush the content of a session since its last flush into daily notes (synchronous).

    `trigger` None derives it from the meter (``manual`` when no flush is due); `llm` is the
    runtime's unless given (the background runner's goes through its breaker).
    """
    meter = read_meter(rt, session_id)
    trigger = (
        trigger or flush_trigger(meter.tokens, meter.messages_since_flush, meter.cycle_flushed, rt.settings) or MANUAL
    )
    model = rt.llm if llm is RUNTIME_LLM else llm
    window = _load_window(rt, meter, trigger, window_tokens(rt.settings, model))
    if window is None:
        return FlushResult(session_id, "nothing_new", trigger)
    notes, usage, extractor = _notes(rt, window, model)
    now = now or utcnow()
    day = local_day(now, rt.settings.tz).isoformat()  # the user's day: the notes' rows and file
    written = _write_as_writer(rt, window, notes, now, day)
    if written is None:
        log.info("session %s: window %s-%s was flushed meanwhile", session_id, window.start, window.end)
        return FlushResult(session_id, "already_flushed", trigger, (window.start, window.end), extractor=extractor)
    path = markdown.append_daily_note(rt.settings.workspace_dir, window.session.user_id, day, written)
    log.info(
        "session %s: flushed window %s-%s (%s) into %d note(s)",
        session_id,
        window.start,
        window.end,
        trigger,
        len(written),
    )
    return FlushResult(
        session_id,
        "flushed",
        trigger,
        (window.start, window.end),
        [t for _, t in written],
        [m for m, _ in written],
        extractor,
        day,
        str(path),
        usage.prompt_tokens,
        usage.completion_tokens,
    )


def _write_as_writer(
    rt: Runtime, window: Window, notes: list[FlushNote], now: datetime, day: str
) -> list[tuple[str, str]] | None:
    """`_write` as a writer of the user's memories (their locks held, the bounded wait first),
    then the outbox drained for the user; None if already flushed."""
    user_id = window.session.user_id
    with rt.user_locks.hold(user_id), user_lock(user_id):
        rt.index_ready()  # an index taken in turns is taken now: one writer at a time from here
        written = _write(rt, window, notes, now, day)
        if written is not None:
            outbox.drain(rt, users=[user_id])
    return written


def flush_reply_budget(limit: int) -> int:
    """The reply budget of a flush call asking for at most `limit` notes."""
    return 48 + NOTE_REPLY_TOKENS * max(limit, 1)


def window_tokens(st: Settings, llm: LLM | None) -> int:
    """The transcript tokens one flush may send: `flush_max_tokens`, or less where the model's
    window holds less beside the flush card and the reply (never under `MIN_WINDOW`: the call
    then says the window is too small, and the window waits)."""
    if llm is None:
        return st.flush_max_tokens
    limit = st.flush_max_notes
    room = llm.room(flush_prompt(limit), FlushNotes, flush_reply_budget(limit)) - TRANSCRIPT_FRAME
    return max(MIN_WINDOW, min(st.flush_max_tokens, room))


def _load_window(rt: Runtime, meter: Meter, trigger: str, max_tokens: int) -> Window | None:
    """The messages since the last flush, cut to `max_tokens` (oldest first)."""
    start = meter.flushed_seq + 1
    if start > meter.last_seq:
        return None
    st = rt.settings
    with session_scope(rt.engine) as s:
        sess = s.get(Session, meter.session_id)
        rows = s.exec(
            select(Message)
            .where(Message.session_id == meter.session_id)
            .where(Message.seq >= start)
            .where(Message.seq <= meter.last_seq)
            .order_by(col(Message.seq))
        ).all()
    if sess is None:
        raise NotFound(f"no session {meter.session_id}")
    tz = st.tz
    lines = [ln for ln in (flush_line(m, st.tool_result_chars, tz, sess.mode) for m in rows) if ln is not None]
    chunks = chunk_lines(lines, max_tokens)
    end = chunks[0].lines[-1].seq if len(chunks) > 1 else meter.last_seq
    return Window(sess, meter.session_id, start, end, chunks[0].lines if chunks else [], meter.cycle, trigger)


def flush_line(m: Message, tool_chars: int, tz: tzinfo, mode: str) -> Line | None:
    """User and assistant text, tool results cut; injected blocks stripped, secrets redacted,
    the steering patterns of the message as said kept (`untrusted.message_steering`)."""
    if m.role not in FLUSH_ROLES:
        return None
    text = clean_prefix(m.content, tool_chars) if m.role == "tool" else clean_for_model(m.content)
    text = text.strip()
    if not text:
        return None
    steering = message_steering(m.content, m.role, mode, tool_chars)
    return Line(m.seq, m.role, m.name, text, day=local_day(m.created_at, tz), steering=steering)


def _notes(rt: Runtime, window: Window, llm: LLM | None) -> tuple[list[FlushNote], Usage, str]:
    """One LLM call over the window (the rules extractor without an LLM)."""
    limit = rt.settings.flush_max_notes
    if not window.lines:
        return [], Usage(), "none"
    seqs = {ln.seq for ln in window.lines}
    if llm is None:
        found = RulesExtractor(limit=limit).extract(Chunk(window.lines), window.session.mode)
        return [FlushNote(text=c.text, seqs=c.seqs) for c in found.candidates], Usage(), "rules"
    parsed, usage = llm.complete_json(
        system=flush_prompt(limit),
        user=f"<transcript>\n{render_body(window.lines)}\n</transcript>",
        schema=FlushNotes,
        name="daily_notes",
        reply_tokens=flush_reply_budget(limit),
    )
    notes = [n.model_copy(update={"seqs": sorted(set(n.seqs) & seqs)}) for n in parsed.notes]
    return notes[:limit], usage, f"llm:{llm.name}"


def _write(
    rt: Runtime, window: Window, notes: list[FlushNote], now: datetime, day: str
) -> list[tuple[str, str]] | None:
    """The window row, the notes and their memories in one transaction; None if already flushed."""
    try:
        with session_scope(rt.engine) as s:
            if flushed_seq(s, window.session_id) >= window.start:
                return None
            s.add(_note_row(window, window.trigger, WINDOW_POSITION, None, now, day))
            written = _add_notes(s, window, notes, now, day)
    except IntegrityError:
        return None
    return written


def _add_notes(s: DBSession, window: Window, notes: list[FlushNote], now: datetime, day: str) -> list[tuple[str, str]]:
    """Each note stored as every memory is (normalised, redacted), flagged untrusted by the very
    rule a dreamed candidate meets (`untrusted.untrusted_reason`): it or a line it rests on
    steers, or, in agent mode, no line of the user's own supports it."""
    sess = window.session
    texts = [stored_text(n.text) for n in notes]
    by_seq = {ln.seq: ln for ln in window.lines}
    existing = _current_daily_notes(s, sess, [content_hash(t) for t in texts])
    written: list[tuple[str, str]] = []
    for note, text in zip(notes, texts):
        if len(normalise(text)) < 3:
            continue
        evidence: dict[str, Any] = {"session_id": sess.id, "external_id": sess.external_id, "seqs": note.seqs}
        reason = untrusted_reason(note.text, [by_seq[q] for q in note.seqs if q in by_seq], sess.mode)
        if reason:  # as a dreamed candidate's: recorded, never counted towards verification
            log.info("daily note flagged untrusted (%s)", reason)
            evidence.update(untrusted=True, untrusted_reason=reason)
        m = existing.get(content_hash(text))
        if m is not None:
            cabinet.merge_into(s, m, [evidence], reason="flushed again", now=now)
        else:
            m = cabinet.add_memory(
                s,
                user_id=sess.user_id,
                agent_id=sess.agent_id,
                project=sess.project,
                team=sess.team,
                kind="daily_note",
                text=text,
                source="flush",
                evidence=[evidence],
                untrusted=reason is not None,
                reason=f"flush ({window.trigger})",
                now=now,
            )
            existing[m.content_hash] = m
        s.add(_note_row(window, text, len(written), m.id, now, day))
        written.append((m.id, text))
    s.flush()
    return written


def _note_row(window: Window, text: str, position: int, memory_id: str | None, now: datetime, day: str) -> DailyNote:
    sess = window.session
    return gate.new_note(
        user_id=sess.user_id,
        agent_id=sess.agent_id,
        session_id=window.session_id,
        day=day,
        text=text,
        memory_id=memory_id,
        window_start_seq=window.start,
        window_end_seq=window.end,
        position=position,
        cycle=window.cycle,
        created_at=now,
    )


def _current_daily_notes(s: DBSession, sess: Session, hashes: list[str]) -> dict[str, Memory]:
    """Current daily notes owned by exactly the session's scope, by content hash."""
    if not hashes:
        return {}
    rows = s.exec(
        select(Memory)
        .where(Memory.user_id == sess.user_id)
        .where(Memory.kind == "daily_note")
        .where(col(Memory.content_hash).in_(hashes))
        .where(col(Memory.status).in_(CURRENT_STATUSES))
    ).all()
    owner = (sess.agent_id, sess.project, sess.team)
    return {m.content_hash: m for m in rows if (m.agent_id, m.project, m.team) == owner}


def run_flush(rt: Runtime, session_id: int) -> FlushResult:
    """A flush run in a worker: the embedded index's turn is given back after it."""
    try:
        return flush_session(rt, session_id)
    finally:
        end_turn(rt)
