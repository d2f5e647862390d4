"""The background runner of daily-note flushes: off the request path, one pending per session,
its model calls behind a circuit breaker."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from dreamer.core.errors import CircuitOpen
from dreamer.engine.runtime import Runtime
from dreamer.llm.breaker import Breaker, BreakerLLM
from dreamer.online.flush.notes import FlushResult, flush_session
from dreamer.store.user_locks import UserLocked

log = logging.getLogger(__name__)

DEFERRED = "deferred"  # a background flush not made (the breaker open, or another writer kept the user's lock): its window stays open


class FlushRunner:
    """Runs flushes off the request path in a thread pool, at most one pending per session.

    Its model calls share one `Breaker` with a cool-down: after `llm_breaker_threshold` failed
    calls in a row, flushes are deferred (status ``deferred``, the window left open for the next
    trigger) for `llm_breaker_cooldown_seconds`, then one is let through to try the model again.
    A flush that waited too long for its user's consolidation lock is deferred the same way."""

    def __init__(
        self,
        rt: Runtime,
        *,
        workers: int = 2,
        on_done: Callable[[FlushResult | None, BaseException | None], None] | None = None,
        breaker: Breaker | None = None,
    ) -> None:
        self.rt = rt
        self.on_done = on_done
        st = rt.settings
        self.breaker = breaker or Breaker(st.llm_breaker_threshold, cooldown_seconds=st.llm_breaker_cooldown_seconds)
        self.llm = BreakerLLM(rt.llm, self.breaker) if rt.llm is not None else None
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="flush")
        self._pending: dict[int, Future[FlushResult]] = {}
        self._lock = threading.Lock()

    def schedule(self, session_id: int, trigger: str | None = None) -> bool:
        """Submit a flush unless one is pending for the session; True when one is pending now."""
        with self._lock:
            if session_id not in self._pending:
                self._pending[session_id] = self._pool.submit(self._run, session_id, trigger)
        return True

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def _run(self, session_id: int, trigger: str | None) -> FlushResult:
        try:
            if self.llm is not None and self.breaker.refusing():  # deferred before reading the window
                result = FlushResult(session_id, DEFERRED, trigger)
            else:
                result = flush_session(self.rt, session_id, trigger=trigger, llm=self.llm)
        except (CircuitOpen, UserLocked) as exc:  # the breaker opened meanwhile, or another writer kept the lock
            log.info("flush of session %s deferred: %s", session_id, exc)
            result = FlushResult(session_id, DEFERRED, trigger)
        except BaseException as exc:
            self._finished(session_id, None, exc)
            raise
        self._finished(session_id, result, None)
        return result

    def _finished(self, session_id: int, result: FlushResult | None, exc: BaseException | None) -> None:
        with self._lock:
            self._pending.pop(session_id, None)
        if exc is not None:
            log.error("flush of session %s failed: %s: %s", session_id, type(exc).__name__, exc, exc_info=exc)
        if self.on_done is not None:
            self.on_done(result, exc)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the flushes pending now; True when all finished."""
        with self._lock:
            futures = list(self._pending.values())
        _, not_done = wait(futures, timeout=timeout)
        return not not_done

    def close(self) -> None:
        self._pool.shutdown(wait=True)
