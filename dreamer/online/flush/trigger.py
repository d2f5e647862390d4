"""The context meter of a live session and the policy of when a flush is due.

The meter of a session is derived from SQL, so every process reads the same state:

* the **cycle**: a batch appended with ``compacted`` marks its first message
  (``meta.meter.compacted``); the cycle number is the count of such marks and the current
  cycle starts at the last one;
* the **tokens** of the active context: the figure the agent reported last in this cycle
  (``meta.meter.context_tokens`` on the last message of its batch) plus the messages after
  it, else the sum of ``token_count`` since the cycle started (kept running on the session
  row as messages are stored, `dreamer.meter`, so a read does not grow with the session);
* the **flushed** point: every flush writes a window row in ``daily_notes`` (position -1,
  text = its trigger) beside its notes (positions 0..n-1); the highest ``window_end_seq``
  is where the next flush starts, and a ``tokens`` window row in the current cycle means
  the cycle's token flush has run.

A flush is due when the tokens reach ``flush_point`` (once per compaction cycle) or when
``flush_every_messages`` messages arrived since the last flush.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ScalarSelect, func
from sqlalchemy import select as sql_select
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import ConfigError, NotFound
from dreamer.core.meter import METER_KEY, MeterState
from dreamer.core.models import DailyNote, Session
from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.store.db import session_scope

WINDOW_POSITION = -1
TOKENS, MESSAGES, MANUAL = "tokens", "messages", "manual"


def flush_point(settings: Settings) -> int:
    """Tokens at which a flush is due: context_window - reserve_floor - soft_threshold."""
    return int(settings.context_window - settings.reserve_floor - settings.soft_threshold)


def compaction_point(settings: Settings) -> int:
    """Tokens at which the agent compacts its context: context_window - reserve_floor."""
    return int(settings.context_window - settings.reserve_floor)


def validate_flush_settings(settings: Settings) -> None:
    """Refuse a flush point that is not positive or not below the compaction point."""
    point, compaction = flush_point(settings), compaction_point(settings)
    if point <= 0:
        raise ConfigError(
            f"flush point context_window - reserve_floor - soft_threshold = {settings.context_window} - "
            f"{settings.reserve_floor} - {settings.soft_threshold} = {point} must be positive"
        )
    if point >= compaction:
        raise ConfigError(
            f"flush point {point} must lie below the compaction point {compaction} "
            f"(context_window - reserve_floor): soft_threshold must be positive"
        )
    for name in ("flush_every_messages", "flush_max_tokens", "flush_max_notes", "flush_workers"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"{name} must be at least 1, got {getattr(settings, name)}")


def flush_trigger(
    tokens: int, messages_since_flush: int, cycle_already_flushed: bool, settings: Settings
) -> str | None:
    """Why a flush is due now (``tokens`` or ``messages``), or None.

    The token trigger fires once per compaction cycle; the message trigger fires every
    `flush_every_messages` messages, so agents that never report a compaction still flush.
    """
    if messages_since_flush <= 0:
        return None
    if tokens >= flush_point(settings) and not cycle_already_flushed:
        return TOKENS
    if messages_since_flush >= settings.flush_every_messages:
        return MESSAGES
    return None


def flush_due(tokens: int, messages_since_flush: int, cycle_already_flushed: bool, settings: Settings) -> bool:
    """Whether `flush_trigger` names a trigger now."""
    return flush_trigger(tokens, messages_since_flush, cycle_already_flushed, settings) is not None


def with_marks(
    messages: Sequence[dict[str, Any]], *, context_tokens: int | None, compacted: bool
) -> list[dict[str, Any]]:
    """Copies of `messages` carrying the meter marks (and no mark a client put there)."""
    out = []
    for i, m in enumerate(messages):
        meta = dict(m.get("meta") or {}) if isinstance(m.get("meta"), dict) else {}
        meta.pop(METER_KEY, None)
        mark: dict[str, Any] = {}
        if compacted and i == 0:
            mark["compacted"] = True
        if context_tokens is not None and i == len(messages) - 1:
            mark["context_tokens"] = int(context_tokens)
        if mark:
            meta[METER_KEY] = mark
        out.append({**m, "meta": meta} if meta else {k: v for k, v in m.items() if k != "meta"})
    return out


@dataclass
class Meter:
    """A session's context meter as read from SQL, with the flush it calls for."""

    session_id: int
    external_id: str
    tokens: int
    flush_point: int
    cycle: int
    last_seq: int
    flushed_seq: int
    cycle_flushed: bool
    trigger: str | None = None
    flush_scheduled: bool = False

    @property
    def messages_since_flush(self) -> int:
        return max(0, self.last_seq - self.flushed_seq)

    def as_json(self) -> dict[str, Any]:
        return {
            "session_id": self.external_id,
            "tokens": self.tokens,
            "flush_point": self.flush_point,
            "cycle": self.cycle,
            "last_seq": self.last_seq,
            "flushed_seq": self.flushed_seq,
            "messages_since_flush": self.messages_since_flush,
            "cycle_flushed": self.cycle_flushed,
            "flush_due": self.trigger is not None,
            "trigger": self.trigger,
            "flush_scheduled": self.flush_scheduled,
        }


def read_meter(rt: Runtime, session_id: int, *, figure: int | None = None) -> Meter:
    """The meter of a stored session; `figure` is a context size the agent reported just now."""
    with session_scope(rt.engine) as s:
        return meter_in(s, rt.settings, session_id, figure=figure)


def meter_in(s: DBSession, settings: Settings, session_id: int, *, figure: int | None = None) -> Meter:
    """The meter read in one statement, within `s`: the session row (the running state
    `dreamer.meter` keeps there) and its flush windows."""
    row = s.execute(
        sql_select(
            col(Session.external_id),
            col(Session.last_seq),
            col(Session.token_total),
            col(Session.meter_cycle),
            col(Session.meter_figure),
            col(Session.meter_base),
            _flushed_to(session_id).label("flushed"),
            _cycle_flushed(session_id).label("done"),
        ).where(col(Session.id) == session_id)
    ).first()
    if row is None:
        raise NotFound(f"no session {session_id}")
    state = MeterState.of(row)
    tokens = figure if figure is not None else state.tokens
    return Meter(
        session_id,
        row.external_id,
        tokens,
        flush_point(settings),
        state.cycle,
        row.last_seq,
        int(row.flushed),
        bool(row.done),
    )


def _flushed_to(session_id: int) -> ScalarSelect[int]:
    """The last message seq a flush of this session has covered (0: none yet), as a scalar subquery."""
    return (
        select(func.coalesce(func.max(DailyNote.window_end_seq), 0))
        .where(DailyNote.session_id == session_id)
        .scalar_subquery()
    )


def _cycle_flushed(session_id: int) -> ScalarSelect[int]:
    """Whether the session's current cycle had its token flush (a count, 0 or more), as a scalar
    subquery correlated with the session row."""
    return (
        select(func.count())
        .select_from(DailyNote)
        .where(DailyNote.session_id == session_id)
        .where(DailyNote.position == WINDOW_POSITION)
        .where(DailyNote.cycle == Session.meter_cycle)
        .where(DailyNote.text == TOKENS)
        .scalar_subquery()
    )


def flushed_seq(s: DBSession, session_id: int) -> int:
    """The last message seq a flush of this session has covered (0: none yet)."""
    return int(s.exec(select(_flushed_to(session_id))).one())
