"""The guard between the agent and an external provider: every prefetch runs in a worker thread
and is waited for only until its deadline; turns are synced in the background, in batches, each
tried again with backoff; a circuit breaker (`dreamer.core.provider_breaker`) cuts a failing
provider off and probes it after a cool-down. Every change of the breaker's state is logged and
kept (`status`, and handed to `record`: the runtime keeps it in the store, where `dreamer status`
in any shell reads it), so the agent never waits on it."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dreamer.core.provider_breaker import CLOSED, BreakerPolicy, BreakerState, admit, failed, succeeded
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.providers.contract import Provider, ProviderHit, Turn
from dreamer.providers.registry import load_provider

log = logging.getLogger(__name__)

KEPT_CHANGES = 50
BREAKER_OPEN = "breaker open"


def in_thread(fn: Callable[..., list[ProviderHit]], *args: Any) -> Future[list[ProviderHit]]:
    """`fn(*args)` in a daemon thread of its own: a call that hangs past its deadline never holds
    up the process's exit (a pool's workers are joined at exit), and the breaker bounds how many."""
    future: Future[list[ProviderHit]] = Future()

    def work() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=work, name="provider-prefetch", daemon=True).start()
    return future


@dataclass
class Fetch:
    """A prefetch under way (`future` None: refused by the open breaker)."""

    future: Future[list[ProviderHit]] | None
    started: float
    refused: str | None = None


class ProviderGuard:
    """A `Provider` behind a deadline, a breaker and a background syncer."""

    def __init__(
        self,
        provider: Provider,
        policy: BreakerPolicy,
        *,
        deadline: float,
        batch: int = 32,
        retries: int = 3,
        record: Callable[[dict[str, Any]], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
        backoff: Callable[[int], float] = lambda n: min(0.05 * 2**n, 5.0),
    ) -> None:
        self.provider, self.policy, self.deadline = provider, policy, deadline
        self.batch, self.retries, self.record, self.clock, self.backoff = batch, retries, record, clock, backoff
        self.name = provider.name
        self.changes: list[dict[str, Any]] = []
        self.dropped = 0  # turns given up on after every retry
        self._state = BreakerState()
        self._lock = threading.Lock()
        self._turns: queue.Queue[Turn | None] = queue.Queue()
        self._syncer: threading.Thread | None = None

    # -- the breaker

    @property
    def state(self) -> str:
        with self._lock:
            return self._state.state

    def _admit(self) -> bool:
        with self._lock:
            ok, new = admit(self._state, self.policy, self.clock())
            self._move(new)
            return ok

    def _outcome(self, error: str | None) -> None:
        with self._lock:
            new = succeeded(self._state) if error is None else failed(self._state, self.policy, self.clock(), error)
            self._move(new)

    def _move(self, new: BreakerState) -> None:
        """Take the new state (the caller holds the lock); a change of state is logged and kept."""
        old, self._state = self._state, new
        if old.state == new.state:
            return
        change = {"at": datetime.now(UTC).isoformat(), "from": old.state, "to": new.state, "reason": new.reason}
        self.changes = [*self.changes, change][-KEPT_CHANGES:]
        log.warning("memory provider %s: breaker %s -> %s (%s)", self.name, old.state, new.state, new.reason or "ok")
        self._record()

    def status(self) -> dict[str, Any]:
        with self._lock:
            s = self._state
            return {
                "provider": self.name,
                "breaker": s.state,
                "failures_in_a_row": s.failures,
                "reason": s.reason,
                "turns_waiting": self._turns.qsize(),
                "turns_dropped": self.dropped,
                "changes": list(self.changes),
            }

    def _record(self) -> None:
        """Hand the state after a change to `record` (the caller holds the lock, so changes are
        recorded in order); a failure to keep it is logged, never the caller's."""
        if self.record is None:
            return
        data = {"provider": self.name, "breaker": self._state.state, "reason": self._state.reason}
        try:
            self.record({**data, "changes": list(self.changes)})
        except Exception as exc:  # the store is busy or gone: the breaker itself goes on
            log.warning("memory provider %s: cannot keep the breaker's state: %s", self.name, exc)

    # -- prefetch

    def start(self, query: str, scope: Scope, k: int) -> Fetch:
        """Start a prefetch now (it runs beside the caller's own search); refused while open."""
        now = self.clock()
        if not self._admit():
            return Fetch(None, now, refused=BREAKER_OPEN)
        return Fetch(in_thread(self.provider.prefetch, query, scope, k), now)

    def collect(self, fetch: Fetch) -> tuple[list[ProviderHit], str | None]:
        """The prefetch's hits, waited for until its deadline; else none and why."""
        if fetch.future is None:
            return [], fetch.refused
        left = max(0.0, self.deadline - (self.clock() - fetch.started))
        try:
            hits = fetch.future.result(timeout=left)
        except FutureTimeout:
            why = f"missed the deadline of {round(self.deadline * 1000)} ms"
        except Exception as exc:  # whatever the provider raised: it is cut off, never the agent
            why = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
        else:
            self._outcome(None)
            return hits, None
        self._outcome(why)
        return [], why

    def prefetch(self, query: str, scope: Scope, k: int) -> tuple[list[ProviderHit], str | None]:
        return self.collect(self.start(query, scope, k))

    # -- sync

    def push(self, turns: Sequence[Turn]) -> None:
        """Queue turns for the background syncer (started on first use)."""
        with self._lock:
            if self._syncer is None:
                self._syncer = threading.Thread(target=self._sync_loop, name=f"sync-{self.name}", daemon=True)
                self._syncer.start()
        for t in turns:
            self._turns.put(t)

    def drained(self) -> None:
        """Wait until every queued turn is synced or given up on."""
        self._turns.join()

    def _sync_loop(self) -> None:
        while True:
            first = self._turns.get()
            if first is None:
                self._turns.task_done()
                return
            batch = [first]
            while len(batch) < self.batch and not self._turns.empty():
                nxt = self._turns.get()
                if nxt is None:
                    self._turns.task_done()
                    self._turns.put(None)
                    break
                batch.append(nxt)
            self._sync_batch(batch)
            for _ in batch:
                self._turns.task_done()

    def _sync_batch(self, batch: list[Turn]) -> None:
        """One batch, tried `retries` more times with backoff (the breaker's cool-down counts as a try)."""
        for attempt in range(self.retries + 1):
            if self._admit():
                try:
                    self.provider.sync(batch)
                except Exception as exc:
                    self._outcome(f"sync: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}")
                else:
                    self._outcome(None)
                    return
            if attempt < self.retries:
                time.sleep(self.backoff(attempt))
        self.dropped += len(batch)
        log.warning("memory provider %s: %d turn(s) not synced after %d tries", self.name, len(batch), self.retries + 1)

    def close(self) -> None:
        if self._syncer is not None:
            self._turns.put(None)
            self._syncer.join(timeout=5)
        self.provider.close()


def open_guard(settings: Settings, record: Callable[[dict[str, Any]], None] | None = None) -> ProviderGuard:
    """The configured provider (`memory_provider`, by entry point) behind a guard built from the
    settings; `record` keeps each change of its breaker's state."""
    provider = load_provider(settings.memory_provider, settings)
    policy = BreakerPolicy(settings.provider_breaker_failures, settings.provider_breaker_cooldown_seconds)
    return ProviderGuard(
        provider,
        policy,
        deadline=settings.provider_deadline_ms / 1000,
        batch=settings.provider_sync_batch,
        retries=settings.provider_sync_retries,
        record=record,
    )


__all__ = ["BREAKER_OPEN", "CLOSED", "Fetch", "ProviderGuard", "open_guard"]
