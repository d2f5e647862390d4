"""Lease rows with expiry: two workers never take the same session at once, and a pass's run
row stays `running` only while its process keeps its run lease."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from dreamer.core.models import DreamRun, Lease, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)


def acquire(engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime | None = None) -> bool:
    """Take the lease if it is free or expired; True when this owner holds it afterwards."""
    now = now or utcnow()
    expires = now + timedelta(seconds=ttl_seconds)
    try:
        with session_scope(engine) as s:
            s.add(Lease(name=name, owner=owner, expires_at=expires))
        return True
    except IntegrityError:
        pass
    return _extend(engine, name, owner, ttl_seconds, now, (col(Lease.expires_at) < now) | (col(Lease.owner) == owner))


def renew(engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime | None = None) -> bool:
    """Extend the lease only while this owner still holds it (expired or not); False once another
    owner took it, even if that owner has let it go since: what it guarded may have changed."""
    return _extend(engine, name, owner, ttl_seconds, now or utcnow(), col(Lease.owner) == owner)


def _extend(
    engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime, which: ColumnElement[bool]
) -> bool:
    """Set the lease row's owner and expiry where `which` holds; whether a row was changed."""
    with session_scope(engine) as s:
        result = s.exec(
            update(Lease)
            .where(col(Lease.name) == name)
            .where(which)
            .values(owner=owner, expires_at=now + timedelta(seconds=ttl_seconds))
        )
        return bool(result.rowcount)


def release(engine: Engine, name: str, owner: str) -> None:
    with session_scope(engine) as s:
        s.exec(delete(Lease).where(col(Lease.name) == name).where(col(Lease.owner) == owner))


def session_lease(session_id: int) -> str:
    return f"session:{session_id}"


def run_lease(run_id: int) -> str:
    return f"run:{run_id}"


class HeldLease:
    """A lease this process took, renewed once half of it has passed when `keep_alive()` is
    asked: a write every `ttl / 2` seconds rather than one per step. `keep_alive()` is False
    once another owner holds it (it expired and was taken): the work it guards should stop.
    A `strict` lease is also lost once another owner has had it, even if it let it go since."""

    def __init__(
        self,
        engine: Engine,
        name: str,
        owner: str,
        ttl_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        strict: bool = False,
    ) -> None:
        self.engine, self.name, self.owner, self.ttl = engine, name, owner, ttl_seconds
        self.clock, self._renew = clock, renew if strict else acquire
        self._renewed = clock()

    def keep_alive(self) -> bool:
        if self.clock() - self._renewed < self.ttl / 2:
            return True
        held = self._renew(self.engine, self.name, self.owner, self.ttl)
        self._renewed = self.clock()
        return held


class RunLease(HeldLease):
    """A pass's run lease (taken with its run row), renewed between sessions."""

    def __init__(
        self,
        engine: Engine,
        run_id: int,
        owner: str,
        ttl_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(engine, run_lease(run_id), owner, ttl_seconds, clock=clock)


ABANDONED = "its process stopped before the pass finished"


def sweep_abandoned_runs(engine: Engine, now: datetime | None = None) -> list[int]:
    """Mark `abandoned` the runs still `running` whose run lease is gone or expired: the process
    running them was killed or lost its machine. A live pass renews its lease every session."""
    now = now or utcnow()
    with session_scope(engine) as s:
        running = s.exec(select(DreamRun).where(col(DreamRun.status) == RunStatus.RUNNING)).all()
        live = set(
            s.exec(select(Lease.name).where(col(Lease.name).like("run:%")).where(col(Lease.expires_at) >= now)).all()
        )
        gone = [run for run in running if run.id is None or run_lease(run.id) not in live]
        for run in gone:
            run.status, run.error, run.finished_at = RunStatus.ABANDONED, ABANDONED, now
            s.add(run)
        ids = [run.id for run in gone if run.id is not None]
    if ids:
        log.warning("marked %d run(s) abandoned: %s", len(ids), ids)
    return ids
