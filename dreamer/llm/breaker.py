"""The consecutive-failure breaker in front of the model.

After `threshold` failed calls in a row the breaker opens and refuses calls. A dream pass keeps
it open for the rest of the pass (no cool-down: the pass stops, the next one starts closed).
The background flusher, which lives as long as `dreamer serve`, gives it a cool-down: once
`cooldown_seconds` have passed, one call is let through; its success closes the breaker, its
failure opens it for another cool-down. While it is open, a flush is deferred: its window
stays open and the next trigger tries again, so nothing is lost.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from pydantic import BaseModel

from dreamer.core.errors import CircuitOpen, LLMError, LLMInvalidOutput, WindowTooSmall
from dreamer.llm.client import LLM, M, Usage

log = logging.getLogger(__name__)

CLOSED, OPEN, PROBE = "closed", "open", "probe"
T = TypeVar("T")


def breaker_state(failures: int, threshold: int, opened_at: float | None, now: float, cooldown: float | None) -> str:
    """``closed`` (calls go), ``open`` (refused) or ``probe`` (the cool-down is over: one call
    may go). A threshold of 0 or less never opens; no cool-down keeps it open."""
    if threshold <= 0 or failures < threshold or opened_at is None:
        return CLOSED
    if cooldown is None or now - opened_at < cooldown:
        return OPEN
    return PROBE


class Breaker:
    """Counts failed calls in a row; thread-safe (the flusher's workers share one)."""

    def __init__(
        self,
        threshold: int,
        *,
        cooldown_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.threshold = threshold
        self.cooldown_seconds = cooldown_seconds
        self.clock = clock
        self.failures = 0
        self.opened_at: float | None = None
        self.open_reason: str | None = None
        self._probing = False
        self._lock = threading.Lock()

    def _state(self) -> tuple[str, bool]:
        """The state now, and whether a call would be refused (the caller holds the lock)."""
        state = breaker_state(self.failures, self.threshold, self.opened_at, self.clock(), self.cooldown_seconds)
        return state, state == OPEN or (state == PROBE and self._probing)

    def refusing(self) -> bool:
        """Whether a call now would be refused (a read: it takes no probe)."""
        with self._lock:
            return self._state()[1]

    def check(self) -> bool:
        """Raise `CircuitOpen` unless a call may go now (after a cool-down, only one at a time);
        True when this call is that one, the probe."""
        with self._lock:
            state, refused = self._state()
            if refused:
                raise CircuitOpen(f"circuit open: {self.open_reason}")
            self._probing = state == PROBE
            return self._probing

    def succeeded(self) -> None:
        with self._lock:
            self.failures, self.opened_at, self.open_reason, self._probing = 0, None, None, False

    def released(self, probe: bool) -> None:
        """A call ended without telling whether the model works: if it was the probe, the next may probe."""
        with self._lock:
            self._probing = self._probing and not probe

    def failed(self, exc: BaseException, probe: bool = False) -> None:
        with self._lock:
            self.failures += 1
            self._probing = self._probing and not probe
            if 0 < self.threshold <= self.failures:
                self.opened_at = self.clock()
                self.open_reason = f"{self.failures} consecutive LLM failures, last: {type(exc).__name__}: {exc}"
                log.error("LLM circuit opened: %s", self.open_reason)

    def call(self, fn: Callable[[], T]) -> T:
        """`fn()` through the breaker: refused while open, its `LLMError` counted, its success closing it."""
        probe = self.check()
        try:
            out = fn()
        except LLMInvalidOutput:
            self.succeeded()  # the endpoint answered: a weak reply is the model's, never an outage
            raise
        except WindowTooSmall:
            self.released(probe)  # never sent: a request too large for the window is no outage either
            raise
        except LLMError as exc:
            self.failed(exc, probe)
            raise
        except BaseException:
            self.released(probe)  # not the model's failure: it neither counts nor keeps the probe out
            raise
        self.succeeded()
        return out


class BreakerLLM:
    """An `LLM` whose calls go through a `Breaker`."""

    def __init__(self, inner: LLM, breaker: Breaker) -> None:
        self.inner = inner
        self.breaker = breaker
        self.name = inner.name

    def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: type[M],
        name: str = "result",
        attempts: int | None = None,
        reply_tokens: int | None = None,
    ) -> tuple[M, Usage]:
        return self.breaker.call(
            lambda: self.inner.complete_json(
                system=system, user=user, schema=schema, name=name, attempts=attempts, reply_tokens=reply_tokens
            )
        )

    def room(self, system: str, schema: type[BaseModel], reply_tokens: int) -> int:
        return self.inner.room(system, schema, reply_tokens)
