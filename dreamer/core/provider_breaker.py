"""The external provider's circuit breaker, as policy (pure): when a failing provider is cut off,
when it is probed again, and what each outcome does. Times are the caller's clock (seconds).

closed --(`failures` failures in a row)--> open --(`cooldown` seconds)--> probe
probe --(the probe succeeds)--> closed;  probe --(it fails)--> open again, for another cool-down.
Only one call goes while probing; the others are refused as while open."""

from __future__ import annotations

from dataclasses import dataclass, replace

CLOSED, OPEN, PROBE = "closed", "open", "probe"


@dataclass(frozen=True)
class BreakerPolicy:
    failures: int  # failures in a row that open it (at least 1)
    cooldown: float  # seconds open before a probe


@dataclass(frozen=True)
class BreakerState:
    state: str = CLOSED
    failures: int = 0  # in a row
    opened_at: float | None = None
    probing: bool = False  # a probe call is out
    reason: str | None = None  # why it last opened


def admit(s: BreakerState, policy: BreakerPolicy, now: float) -> tuple[bool, BreakerState]:
    """Whether a call may go now, and the state it leaves: an open breaker past its cool-down
    lets exactly one call through as a probe."""
    if s.state == CLOSED:
        return True, s
    if s.state == OPEN and s.opened_at is not None and now - s.opened_at >= policy.cooldown:
        return True, replace(s, state=PROBE, probing=True)
    return False, s


def succeeded(s: BreakerState) -> BreakerState:
    """A call answered in time: the breaker closes and the count starts again."""
    return BreakerState()


def failed(s: BreakerState, policy: BreakerPolicy, now: float, reason: str) -> BreakerState:
    """A call failed or missed its deadline: a failed probe opens it again at once; in a closed
    breaker, the `policy.failures`-th failure in a row opens it."""
    count = s.failures + 1
    if s.state == PROBE or count >= max(1, policy.failures):
        return BreakerState(OPEN, count, now, False, reason)
    return replace(s, failures=count, reason=reason)
