"""Lease rows with expiry: two workers never take the same session at once, and a pass's run
row stays `running` only while its process keeps its run lease. A lease names its holder
(``host:pid:...``); a pass's leases also carry its heartbeat. A lease whose holder is gone (a
process of this host that no longer runs) or whose heartbeat fell silent for `SILENT_GRACE` is
free at once, not only at its expiry: a killed pass does not keep its sessions."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import ColumnElement, delete, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from dreamer.core.models import DreamRun, Lease, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)


HEARTBEAT_SECONDS = 10.0  # how often a pass says it still works on its leases
SILENT_GRACE = 60.0  # a holder whose heartbeat is this old is gone (killed on another host, or frozen)


def acquire(
    engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime | None = None, *, beat: bool = False
) -> bool:
    """Take the lease if it is free, expired, or its holder is gone or silent (`holder_gone`,
    `SILENT_GRACE`); True when this owner holds it afterwards. A `beat` lease carries a heartbeat
    (`Heartbeat` keeps it)."""
    now = now or utcnow()
    expires = now + timedelta(seconds=ttl_seconds)
    try:
        with session_scope(engine) as s:
            s.add(Lease(name=name, owner=owner, expires_at=expires, heartbeat_at=now if beat else None))
        return True
    except IntegrityError:
        pass
    silent = col(Lease.heartbeat_at).is_not(None) & (col(Lease.heartbeat_at) < now - timedelta(seconds=SILENT_GRACE))
    free = (col(Lease.expires_at) < now) | (col(Lease.owner) == owner) | silent
    if _extend(engine, name, owner, ttl_seconds, now, free, beat):
        return True
    held = holder(engine, name)
    if held is None or not holder_gone(held.owner):
        return False
    log.warning("lease %s: its holder %s is gone; taken over by %s", name, held.owner, owner)
    return _extend(engine, name, owner, ttl_seconds, now, col(Lease.owner) == held.owner, beat)


def renew(
    engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime | None = None, *, beat: bool = False
) -> bool:
    """Extend the lease only while this owner still holds it (expired or not); False once another
    owner took it, even if that owner has let it go since: what it guarded may have changed."""
    return _extend(engine, name, owner, ttl_seconds, now or utcnow(), col(Lease.owner) == owner, beat)


def _extend(
    engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime, which: ColumnElement[bool], beat: bool
) -> bool:
    """Set the lease row's owner, expiry and heartbeat where `which` holds; whether a row was changed."""
    with session_scope(engine) as s:
        result = s.exec(
            update(Lease)
            .where(col(Lease.name) == name)
            .where(which)
            .values(owner=owner, expires_at=now + timedelta(seconds=ttl_seconds), heartbeat_at=now if beat else None)
        )
        return bool(result.rowcount)


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as its row says."""

    owner: str
    expires_at: datetime
    heartbeat_at: datetime | None


def holder(engine: Engine, name: str) -> Holder | None:
    """The lease's holder, or None when nobody holds it."""
    with session_scope(engine) as s:
        row = s.get(Lease, name)
        return None if row is None else Holder(row.owner, row.expires_at, row.heartbeat_at)


def holder_text(held: Holder, now: datetime) -> str:
    """Who holds a lease, for a person: the pass's run, process and host when the owner names
    them (``host:pid:run``), and how long ago it last beat."""
    parts = held.owner.split(":")
    who = held.owner
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        who = f"run {parts[2]} (process {parts[1]} on {parts[0]})"
    if held.heartbeat_at is None:
        return who
    ago = max(0, int((now - as_aware(held.heartbeat_at)).total_seconds()))
    return f"{who}, which last beat {ago} s ago"


def holder_gone(owner: str, *, host: str | None = None, alive: Callable[[int], bool] | None = None) -> bool:
    """Whether the holder an owner names (``host:pid:...``) is a process of this host (`host`)
    that no longer runs (`alive`: `pid_alive`). An owner of another host, or not of that form,
    is never judged gone here: its heartbeat or its expiry tells."""
    parts = owner.split(":")
    if len(parts) < 2 or not parts[1].isdigit():
        return False
    pid = int(parts[1])
    here = socket.gethostname() if host is None else host
    return parts[0] == here and pid != os.getpid() and not (alive or pid_alive)(pid)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` runs on this host (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc here: the signal said it exists
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def beat(engine: Engine, owner: str, now: datetime | None = None) -> int:
    """Say that `owner` still works: the heartbeat of each of its beating leases set to now."""
    with session_scope(engine) as s:
        result = s.exec(
            update(Lease)
            .where(col(Lease.owner) == owner)
            .where(col(Lease.heartbeat_at).is_not(None))
            .values(heartbeat_at=now or utcnow())
        )
        return int(result.rowcount)


class Heartbeat:
    """Beats for `owner` every `every` seconds in a daemon thread while the `with` block runs, so
    its leases stay its own through a long model call, and are free soon after it dies."""

    def __init__(self, engine: Engine, owner: str, every: float = HEARTBEAT_SECONDS) -> None:
        self.engine, self.owner, self.every = engine, owner, every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.every)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            try:
                beat(self.engine, self.owner)
            except Exception as exc:  # the store is away for a moment: the next beat tries again
                log.warning("lease heartbeat of %s failed: %s", self.owner, exc)


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
        beat: bool = False,
    ) -> None:
        self.engine, self.name, self.owner, self.ttl, self.beat = engine, name, owner, ttl_seconds, beat
        self.clock, self._renew = clock, renew if strict else acquire
        self._renewed = clock()

    def keep_alive(self) -> bool:
        if self.clock() - self._renewed < self.ttl / 2:
            return True
        held = self._renew(self.engine, self.name, self.owner, self.ttl, beat=self.beat)
        self._renewed = self.clock()
        return held


class RunLease(HeldLease):
    """A pass's run lease (taken with its run row, with a heartbeat), renewed between sessions."""

    def __init__(
        self,
        engine: Engine,
        run_id: int,
        owner: str,
        ttl_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(engine, run_lease(run_id), owner, ttl_seconds, clock=clock, beat=True)


ABANDONED = "its process stopped before the pass finished"


def sweep_abandoned_runs(engine: Engine, now: datetime | None = None) -> list[int]:
    """Mark `abandoned` the runs still `running` whose run lease is gone, expired, or held by a
    holder that is gone or silent: the process running them was killed or lost its machine. A
    live pass renews its lease every session and beats while it works."""
    now = now or utcnow()
    with session_scope(engine) as s:
        running = s.exec(select(DreamRun).where(col(DreamRun.status) == RunStatus.RUNNING)).all()
        held = s.exec(select(Lease).where(col(Lease.name).like("run:%")).where(col(Lease.expires_at) >= now)).all()
        live = {lease.name for lease in held if not _dead(lease, now)}
        gone = [run for run in running if run.id is None or run_lease(run.id) not in live]
        for run in gone:
            run.status, run.error, run.finished_at = RunStatus.ABANDONED, ABANDONED, now
            s.add(run)
        ids = [run.id for run in gone if run.id is not None]
    if ids:
        log.warning("marked %d run(s) abandoned: %s", len(ids), ids)
    return ids


def _dead(lease: Lease, now: datetime) -> bool:
    """Whether a lease's holder is gone or its heartbeat silent past the grace."""
    silent = lease.heartbeat_at is not None and as_aware(lease.heartbeat_at) < now - timedelta(seconds=SILENT_GRACE)
    return silent or holder_gone(lease.owner)


def as_aware(at: datetime) -> datetime:
    """A time read back from the store as UTC-aware (SQLite hands back naive UTC)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
