"""Sessions the model failed on: the failure recorded on the cursor, counted toward quarantine
when it is the session's own, and timeouts counted at the end of the pass only if the endpoint
answered other requests."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError, TimeoutError

from dreamer.core.errors import (
    BudgetExceeded,
    Busy,
    CircuitOpen,
    EndpointUnusable,
    IndexFailure,
    StoreError,
)
from dreamer.core.models import Cursor, utcnow
from dreamer.engine.runtime import Runtime
from dreamer.llm.guard import GuardedLLM, endpoint_answers
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

COUNTED_TIMEOUT = "(counted: the endpoint answered other requests)"


@dataclass(frozen=True)
class TimedOut:
    """A session whose model call timed out: the failure as its cursor recorded it (to count it
    only if the cursor still holds it), and how many calls the endpoint had answered by then."""

    session_id: int
    recorded: tuple[int, str]  # the cursor's attempts and last error after the failure
    answered: int


GLOBAL_FAILURES: tuple[type[BaseException], ...] = (
    StoreError,  # the store is not there or not at its schema
    OperationalError,  # the database is down, locked or out of space
    InterfaceError,
    DisconnectionError,
    TimeoutError,  # no connection free in the pool
    IndexFailure,  # the index refused or is taken by another process
    CircuitOpen,  # the model endpoint failed too often in a row
    BudgetExceeded,  # the pass's token budget is spent
    Busy,  # the agent is at work: the pass waits
    OSError,  # the disk: full, read-only, gone
    MemoryError,
)
"""What stops a whole pass, whichever session it happened in: nothing of that session caused it."""


def is_global(exc: BaseException) -> bool:
    """Whether a failure while handling one session stops the pass (`GLOBAL_FAILURES`, and what is
    no `Exception` at all: an interrupt, an exit). Anything else (the model's answer, a value the
    session holds that the code cannot handle, a bug met only by that session's data) is the
    session's own: recorded on its cursor, counted toward its quarantine, and the pass goes on."""
    return not isinstance(exc, Exception) or isinstance(exc, GLOBAL_FAILURES)


def counts_as_its_own(exc: Exception) -> bool:
    """Whether a failure counts toward the session's quarantine when it happens: only what the
    model made of this session does. An endpoint that serves no request (`EndpointUnusable`)
    would otherwise quarantine every session it was asked about, each Celery beat, for as long
    as it lasts; a timeout is counted later, if the endpoint answered other requests
    (`count_timeouts`)."""
    return not isinstance(exc, EndpointUnusable)


def record_failure(rt: Runtime, session_id: int, error: str, *, counted: bool) -> tuple[int, str] | None:
    """The cursor stays and says why; a `counted` failure adds to its attempts, up to quarantine.
    Returns the cursor's attempts and last error as recorded (None without a cursor)."""
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, session_id)
        if cursor is None:
            return None
        _count(rt, cursor, error[:2000], counted)
        s.add(cursor)
        recorded = (cursor.attempts, cursor.last_error or "")
    log.warning("session %s failed (%s): %s", session_id, cursor.status, error)
    return recorded


def _count(rt: Runtime, cursor: Cursor, error: str, counted: bool) -> None:
    cursor.attempts += 1 if counted else 0
    cursor.last_error = error
    cursor.status = "quarantined" if cursor.attempts >= rt.settings.max_attempts else "failed"
    cursor.updated_at = utcnow()


def count_timeouts(rt: Runtime, llm: GuardedLLM | None, timed_out: list[TimedOut], *, may_probe: bool) -> None:
    """A timeout counts toward its session's quarantine when the endpoint answered a call after
    it in this pass, or (unless the pass was halted) answers a probe now: then it is the
    session's own request the model cannot answer in time, and without counting it would be
    sent again every pass, at the model's cost, for ever. When the endpoint answers nothing
    after it (an outage, also one that began mid-pass), nothing is counted."""
    if not timed_out or llm is None:
        return
    waiting = [t for t in timed_out if llm.answered <= t.answered]
    if waiting and not (may_probe and endpoint_answers(llm)):
        log.info("%d timed-out session(s) not counted: the endpoint answered nothing after them", len(waiting))
        timed_out = [t for t in timed_out if t not in waiting]
    for t in timed_out:
        _count_timeout(rt, t)


def _count_timeout(rt: Runtime, t: TimedOut) -> None:
    """Count the timeout, if the cursor still holds it (another worker may have dreamed or
    failed the session since)."""
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, t.session_id)
        if cursor is None or cursor.status != "failed" or (cursor.attempts, cursor.last_error or "") != t.recorded:
            return
        last = t.recorded[1]
        _count(rt, cursor, f"{last[: 2000 - len(COUNTED_TIMEOUT) - 1]} {COUNTED_TIMEOUT}", True)
        s.add(cursor)
    log.warning("session %s: its timeout counted (%s)", t.session_id, cursor.status)
