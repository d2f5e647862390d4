"""What workers, the daemon and reprocessing run, as plain functions over a Runtime.

Every job is idempotent under redelivery: the cursor only moves in the transaction that
stores a session's memories, and a session lease keeps two workers off one session, so a
second run of the same job finds nothing left to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from sqlmodel import col, select

from dreamer.core.errors import Busy, Retryable
from dreamer.core.models import Cursor, DreamRun, Lease, Session, utcnow
from dreamer.engine.busy_scope import due_by_busy, session_busy
from dreamer.engine.runtime import Runtime
from dreamer.engine.schedule import record_skip
from dreamer.engine.shared_index import end_turn
from dreamer.store import leases
from dreamer.store.db import session_scope
from dreamer.store.user_locks import RETRY_DELAY, UserLocked

log = logging.getLogger(__name__)

Enqueue = Callable[[int], None]


class LeaseBusy(Retryable):
    """Another worker holds the session's lease; try again once it is released or expired."""


@dataclass
class FanOut:
    session_ids: list[int] = field(default_factory=list)
    skipped: str | None = None
    run_id: int | None = None


def fan_out(rt: Runtime, enqueue: Enqueue, *, trigger: str, now: datetime | None = None) -> FanOut:
    """The due sessions whose owners are idle, one `enqueue(session_id)` each; nothing (and a
    skip row) when every due session's owner is busy. A busy owner's sessions stay due."""
    now = now or utcnow()
    idle, waiting = due_by_busy(rt, now)
    if not idle and waiting:
        return FanOut(skipped=waiting, run_id=record_skip(rt.engine, trigger, waiting).id)
    ids = [sess.id for sess in idle if sess.id is not None]
    for session_id in ids:
        enqueue(session_id)
    log.info("fanned out %d due session(s)", len(ids))
    return FanOut(session_ids=ids)


def run_session(
    rt: Runtime,
    session_id: int,
    *,
    trigger: str,
    catch_up: bool = False,
    release: bool = True,
    wait_while_busy: bool = False,
) -> list[DreamRun]:
    """Dream over one session (until it is caught up with `catch_up`). With `release` the index
    turn is given back after each pass. Raises (each retryable) `Busy` with `wait_while_busy`
    while the session's user or agent is busy, `LeaseBusy` when another worker has the session, `UserLocked` when
    another writer kept its user's consolidation lock."""
    from dreamer.engine.dream import run_pass

    if wait_while_busy and (reason := session_busy(rt, session_id, utcnow())):
        raise Busy(f"session {session_id} waits: {reason}")
    runs: list[DreamRun] = []
    while True:
        try:
            dreamed = run_pass(rt, trigger=trigger, session_ids=[session_id], force=True)
        finally:
            if release:
                end_turn(rt)
        run = dreamed.run
        runs.append(run)
        if dreamed.left_locked():
            raise UserLocked(f"session {session_id}: {run.error}", delay=RETRY_DELAY)
        if not run.sessions or not catch_up or not pending(rt, session_id):
            break
    if pending(rt, session_id) and (wait := lease_wait(rt, session_id)) is not None:
        raise LeaseBusy(f"session {session_id} is leased by another worker", delay=wait)
    return runs


def pending(rt: Runtime, session_id: int) -> bool:
    """True when the session still has messages past its cursor and is not quarantined."""
    with session_scope(rt.engine) as s:
        row = s.exec(
            select(Session.last_seq, Cursor.processed_seq, Cursor.status)
            .join(Cursor, col(Cursor.session_id) == col(Session.id))
            .where(Session.id == session_id)
        ).first()
    return row is not None and row[0] > row[1] and row[2] != "quarantined"


def lease_wait(rt: Runtime, session_id: int, now: datetime | None = None) -> float | None:
    """Seconds until another holder's lease on the session expires, or None when it is free."""
    now = now or utcnow()
    with session_scope(rt.engine) as s:
        lease = s.get(Lease, leases.session_lease(session_id))
    if lease is None:
        return None
    expires = lease.expires_at if lease.expires_at.tzinfo else lease.expires_at.replace(tzinfo=now.tzinfo)
    return max(0.5, (expires - now).total_seconds() + 0.5)
