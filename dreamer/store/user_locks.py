"""One consolidation of a user at a time, across threads, processes and machines.

A writer plans against what the index holds (`plan_candidates`: the user's nearest current
memories), applies the plan in SQL and drains the outbox into the index. Two writers planning
for the same user at once would not see each other's new memory and would both add it, so
every writer holds the user's consolidation lock from planning until the drain has put its
result in the index: a dream pass for each session, an agent's `remember` and
`forget_memory`, a daily-note flush. A writer waits for it at most `user_lock_wait_seconds`,
then gives up with `UserLocked`, a `Retryable`: a pass leaves the session due and goes on, a
Celery task tries again later, the API answers 503, a background flush is deferred.

A hold gives a `Hold`: a writer calls `confirm()` between planning and applying. A lease that
ran out while a plan waited on the model (a judgement call retried through an outage for longer
than `lease_seconds`) may have let another writer in; `confirm()` then raises `UserLocked` and
nothing is applied. A lease still this writer's is extended by `confirm()` for the apply.

Which locks a runtime gets depends on who else can write to its index:
* a Qdrant server (`DREAMER_QDRANT_URL`): any process on any machine, so `LeaseLocks`, a lease
  row named ``consolidate:<sha-256 of the user id>`` (`leases`; a user id may fill all 255
  characters a lease name has) on the shared store. A hold is one session's plan, apply and
  drain, far shorter than `lease_seconds`; a holder that dies leaves the row to expire then;
* an embedded index one process owns (Qdrant Edge and qdrant-client's local mode lock their
  folder): only this process's threads (`dreamer serve`'s API writes and its hosted passes), so
  `ProcessLocks`, a lock per user in memory, without a write to the store for each session;
* an embedded index taken in turns (`TimeSharedIndex`): none, `Unlocked`. A process keeps the
  turn from its first index call until the end of its task or pass, so consolidation is already
  one process at a time. A lock there could even deadlock: a pass holding the turn (after a
  session of user X) would wait for user Y's lock while the holder of that lock waits for the
  turn.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Generic, Protocol, TypeVar

from sqlalchemy.engine import Engine

from dreamer.core.errors import Retryable
from dreamer.core.settings import Settings
from dreamer.store import leases

log = logging.getLogger(__name__)

POLL_SECONDS = 0.1  # between two tries for a held lock
RETRY_DELAY = 5.0  # what a task that gave up waits before it tries again

T = TypeVar("T")


class UserLocked(Retryable):
    """Another writer kept consolidating the user's memories for longer than we may wait."""


class Hold(Protocol):
    def confirm(self) -> None:
        """Raise `UserLocked` if the lock may have been another writer's since it was taken."""


class UserLocks(Protocol):
    def hold(self, user_id: str) -> AbstractContextManager[Hold]:
        """Hold the user's consolidation lock for the block."""


class Kept:
    """The hold of a lock that cannot lapse (in memory, or none at all)."""

    def confirm(self) -> None:
        return None


KEPT = Kept()


def lock_name(user_id: str) -> str:
    return "consolidate:" + hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()


def wait_for(
    take: Callable[[], T | None],
    wait_seconds: float,
    poll_seconds: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> tuple[T | None, float]:
    """Ask `take()` until it gives something other than None, sleeping `poll_seconds` between
    tries, for at most `wait_seconds` by `clock`: what it gave (None if it never did) and how
    long was waited."""
    start = clock()
    while (token := take()) is None:
        waited = clock() - start
        if waited >= wait_seconds:
            return None, waited
        sleep(poll_seconds)
    return token, clock() - start


class KeyedLocks:
    """A `threading.Lock` per key of this process, made on first use."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())


class _PolledLocks(Generic[T]):
    """`hold` for a lock taken by asking again and again: `_take(user_id)` gives a token, or
    None while another writer holds it; `_give(token)` lets go."""

    def __init__(
        self,
        *,
        wait_seconds: float,
        poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.wait_seconds, self.poll_seconds, self.clock, self.sleep = wait_seconds, poll_seconds, clock, sleep

    @contextmanager
    def hold(self, user_id: str) -> Iterator[Hold]:
        token, waited = wait_for(
            lambda: self._take(user_id), self.wait_seconds, self.poll_seconds, self.clock, self.sleep
        )
        if token is None:
            raise UserLocked(
                f"user {user_id!r}: another writer kept consolidating their memories; gave up after {waited:g} s",
                delay=RETRY_DELAY,
            )
        try:
            yield self._hold_of(user_id, token)
        finally:
            self._give(token)

    def _take(self, user_id: str) -> T | None:
        raise NotImplementedError

    def _give(self, token: T) -> None:
        raise NotImplementedError

    def _hold_of(self, user_id: str, token: T) -> Hold:
        return KEPT


class LeaseLocks(_PolledLocks[tuple[str, str]]):
    """Consolidation locks as lease rows: each hold has its own owner, so two threads of one
    process exclude each other as two processes do."""

    def __init__(
        self,
        engine: Engine,
        *,
        ttl_seconds: float,
        wait_seconds: float,
        poll_seconds: float = POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        super().__init__(wait_seconds=wait_seconds, poll_seconds=poll_seconds, clock=clock, sleep=sleep)
        self.engine, self.ttl = engine, ttl_seconds

    def _take(self, user_id: str) -> tuple[str, str] | None:
        name, owner = lock_name(user_id), _owner()
        return (name, owner) if leases.acquire(self.engine, name, owner, self.ttl) else None

    def _give(self, token: tuple[str, str]) -> None:
        leases.release(self.engine, *token)

    def _hold_of(self, user_id: str, token: tuple[str, str]) -> Hold:
        return LeaseHold(self.engine, user_id, *token, ttl_seconds=self.ttl, clock=self.clock)


class LeaseHold:
    """A held lease row (`leases.HeldLease`, strict): `confirm()` renews it once half its time
    has passed, and raises `UserLocked` if another owner has had it meanwhile."""

    def __init__(
        self, engine: Engine, user_id: str, name: str, owner: str, *, ttl_seconds: float, clock: Callable[[], float]
    ) -> None:
        self.user_id = user_id
        self.lease = leases.HeldLease(engine, name, owner, ttl_seconds, clock=clock, strict=True)

    def confirm(self) -> None:
        if not self.lease.keep_alive():
            raise UserLocked(
                f"user {self.user_id!r}: the consolidation lock ran out during planning and another "
                "writer took it; nothing was applied",
                delay=RETRY_DELAY,
            )


class ProcessLocks(_PolledLocks[threading.Lock]):
    """Consolidation locks of this process: one per user, shared by every runtime the process
    opens (they share the one index it owns)."""

    def _take(self, user_id: str) -> threading.Lock | None:
        lock = _CONSOLIDATING.get(user_id)
        return lock if lock.acquire(blocking=False) else None

    def _give(self, token: threading.Lock) -> None:
        token.release()


_CONSOLIDATING = KeyedLocks()


class Unlocked:
    """For an index taken in turns: the turn already makes consolidation one process at a time."""

    @contextmanager
    def hold(self, user_id: str) -> Iterator[Hold]:
        yield KEPT


def build_user_locks(settings: Settings, engine: Engine, index: object) -> UserLocks:
    """`Unlocked` when the index is taken in turns, lease locks on the store with a Qdrant
    server, else the locks of this process."""
    if getattr(index, "takes_turns", False):
        return Unlocked()
    if settings.qdrant_url:
        return LeaseLocks(engine, ttl_seconds=settings.lease_seconds, wait_seconds=settings.user_lock_wait_seconds)
    return ProcessLocks(wait_seconds=settings.user_lock_wait_seconds)


def _owner() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"


__all__ = [
    "KEPT",
    "Hold",
    "KeyedLocks",
    "LeaseHold",
    "LeaseLocks",
    "ProcessLocks",
    "Unlocked",
    "UserLocked",
    "UserLocks",
    "build_user_locks",
    "lock_name",
    "wait_for",
]
