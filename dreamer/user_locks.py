"""One consolidation of a user at a time, across processes and machines.

A writer plans against what the index holds (`plan_candidates`: the user's nearest current
memories), applies the plan in SQL and drains the outbox into the index. Two writers planning
for the same user at once would not see each other's new memory and would both add it, so
every writer holds the user's consolidation lock from planning until the drain has put its
result in the index: a dream pass for each session, an agent's `remember` and
`forget_memory`. The lock is a lease row named ``consolidate:<sha-256 of the user id>``
(`leases`; a user id may fill all 255 characters a lease name has), so it holds across Celery
workers, API servers and machines on one store; a writer waits for it at most
`user_lock_wait_seconds`, then gives up with `UserLocked`, a `Retryable` (a Celery task tries
again later, the API answers 503). A hold is one session's plan, apply and drain, far
shorter than `lease_seconds`; a holder that dies leaves the row to expire after that.

An embedded index taken in turns (`TimeSharedIndex`) needs no lock: a process keeps the turn
from its first index call until the end of its task or pass, so consolidation is already one
process at a time. Taking the lock there could even deadlock: a pass holding the turn (after a
session of user X) would wait for user Y's lock while the holder of that lock waits for the
turn. So the runtime of such an index gets `Unlocked`, and only an index that is not taken in
turns (a Qdrant server, or an embedded index one process owns) gets `LeaseLocks`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import time
from contextlib import contextmanager
from typing import Callable, ContextManager, Iterator, Protocol

from sqlalchemy.engine import Engine

from dreamer import leases
from dreamer.config import Settings
from dreamer.errors import Retryable

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # between two tries for a held lock
RETRY_DELAY = 5.0  # what a task that gave up waits before it tries again


class UserLocked(Retryable):
    """Another writer kept consolidating the user's memories for longer than we may wait."""


class UserLocks(Protocol):
    def hold(self, user_id: str) -> ContextManager[None]:
        """Hold the user's consolidation lock for the block."""


def lock_name(user_id: str) -> str:
    return "consolidate:" + hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()


def wait_for(
    take: Callable[[], bool], wait_seconds: float, poll_seconds: float,
    clock: Callable[[], float], sleep: Callable[[float], None],
) -> float | None:
    """Ask `take()` until it says yes, sleeping `poll_seconds` between tries, for at most
    `wait_seconds` by `clock`. None when taken, else how long was waited."""
    start = clock()
    while not take():
        waited = clock() - start
        if waited >= wait_seconds:
            return waited
        sleep(poll_seconds)
    return None


class LeaseLocks:
    """Consolidation locks as lease rows: each hold has its own owner, so two threads of one
    process exclude each other as two processes do."""

    def __init__(
        self, engine: Engine, *, ttl_seconds: float, wait_seconds: float, poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.engine, self.ttl, self.wait_seconds, self.poll_seconds = engine, ttl_seconds, wait_seconds, poll_seconds
        self.clock, self.sleep = clock, sleep

    @contextmanager
    def hold(self, user_id: str) -> Iterator[None]:
        name, owner = lock_name(user_id), _owner()
        waited = wait_for(lambda: leases.acquire(self.engine, name, owner, self.ttl),
                          self.wait_seconds, self.poll_seconds, self.clock, self.sleep)
        if waited is not None:
            raise UserLocked(f"user {user_id!r}: another writer kept consolidating their memories; "
                             f"gave up after {waited:g} s", delay=RETRY_DELAY)
        try:
            yield
        finally:
            leases.release(self.engine, name, owner)


class Unlocked:
    """For an index taken in turns: the turn already makes consolidation one process at a time."""

    @contextmanager
    def hold(self, user_id: str) -> Iterator[None]:
        yield


def build_user_locks(settings: Settings, engine: Engine, index) -> UserLocks:
    """`Unlocked` when the index is taken in turns, else lease locks on the store."""
    if getattr(index, "takes_turns", False):
        return Unlocked()
    return LeaseLocks(engine, ttl_seconds=settings.lease_seconds, wait_seconds=settings.user_lock_wait_seconds)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


__all__ = ["LeaseLocks", "Unlocked", "UserLocked", "UserLocks", "build_user_locks", "lock_name", "wait_for"]
