"""When the dreamer runs: the pure scheduling policy (warm-up, interval, busy backoff, no
overlap) and its persisted state (`scheduler_state` rows, shown by `dreamer status`).

The policy is a small state machine over explicit times: `next_action(state, now, busy)`
decides, `on_backoff` / `on_start` / `on_finish` move the state on. Nothing here reads a
clock or sleeps; the APScheduler shell in `workers/scheduler.py` does.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine

from dreamer.core.models import DreamRun, SchedulerState, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.core.settings import Settings
from dreamer.store.busy import busy_backoff
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

RUN, BACKOFF, WAIT, OVERLAP = "run", "backoff", "wait", "overlap"
JOB_NAME = "dream"


@dataclass(frozen=True)
class Policy:
    interval: float
    warmup: float
    backoff_base: float
    backoff_cap: float

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        return cls(
            interval=settings.dream_interval_seconds,
            warmup=settings.warmup_seconds,
            backoff_base=settings.backoff_base_seconds,
            backoff_cap=settings.backoff_cap_seconds,
        )


@dataclass(frozen=True)
class SchedState:
    """`anchor` is the first regular run; regular runs follow every `interval` after it."""

    anchor: datetime
    next_slot: datetime
    retry_at: datetime | None = None
    consecutive_skips: int = 0
    running: bool = False
    last_run_at: datetime | None = None
    last_run_id: int | None = None
    last_skip_reason: str | None = None

    @property
    def due_at(self) -> datetime:
        """The earlier of the next regular run and a pending busy retry."""
        return min(self.next_slot, self.retry_at) if self.retry_at else self.next_slot


@dataclass(frozen=True)
class Action:
    kind: str  # run | backoff | wait | overlap
    at: datetime | None = None
    delay: float | None = None
    reason: str | None = None


def initial_state(start: datetime, policy: Policy) -> SchedState:
    anchor = start + timedelta(seconds=policy.warmup)
    return SchedState(anchor=anchor, next_slot=anchor)


def slot_after(anchor: datetime, interval: float, after: datetime) -> datetime:
    """The first regular run strictly after `after` (the anchor itself if it is later)."""
    if after < anchor:
        return anchor
    k = math.floor((after - anchor).total_seconds() / interval) + 1
    return anchor + timedelta(seconds=k * interval)


def next_action(state: SchedState, now: datetime, busy: str | None, *, policy: Policy, rand: float) -> Action:
    """What to do at `now`: never two passes at once, nothing before due, back off while busy."""
    if state.running:
        return Action(OVERLAP, reason="a pass is still running")
    if now < state.due_at:
        return Action(WAIT, at=state.due_at)
    if busy:
        delay = busy_backoff(state.consecutive_skips, base=policy.backoff_base, cap=policy.backoff_cap, rand=rand)
        return Action(BACKOFF, at=now + timedelta(seconds=delay), delay=delay, reason=busy)
    return Action(RUN, at=now)


def on_backoff(state: SchedState, action: Action, now: datetime, policy: Policy) -> SchedState:
    return replace(
        state,
        retry_at=action.at,
        consecutive_skips=state.consecutive_skips + 1,
        last_skip_reason=action.reason,
        next_slot=slot_after(state.anchor, policy.interval, now),
    )


def on_start(state: SchedState, now: datetime, policy: Policy) -> SchedState:
    return replace(state, running=True, retry_at=None, next_slot=slot_after(state.anchor, policy.interval, now))


def on_finish(state: SchedState, now: datetime, run_id: int | None, *, cut_short: bool = False) -> SchedState:
    """A pass ran (whatever its outcome): the backoff starts again from the base, unless the pass
    left sessions for an early retry (`cut_short`): then the backoffs before it go on doubling."""
    skips = state.consecutive_skips if cut_short else 0
    return replace(state, running=False, consecutive_skips=skips, last_run_at=now, last_run_id=run_id)


def on_cut_short(state: SchedState, now: datetime, reason: str, *, policy: Policy, rand: float) -> SchedState:
    """A finished pass left sessions for later (the agent became busy, or another writer kept a
    user's consolidation lock): they are retried after the backoff (before the next regular run
    when that is sooner), as a busy skip is; `on_finish(cut_short=True)` kept the streak."""
    delay = busy_backoff(state.consecutive_skips, base=policy.backoff_base, cap=policy.backoff_cap, rand=rand)
    return on_backoff(
        state, Action(BACKOFF, at=now + timedelta(seconds=delay), delay=delay, reason=reason), now, policy
    )


# --------------------------------------------------------------------------- persisted state


def load_state(engine: Engine, start: datetime, policy: Policy, name: str = JOB_NAME) -> SchedState:
    """A fresh schedule from `start`, keeping the last run recorded by an earlier daemon."""
    state = initial_state(start, policy)
    with session_scope(engine) as s:
        row = s.get(SchedulerState, name)
    if row is None:
        return state
    return replace(state, last_run_at=row.last_run_at, last_run_id=row.last_run_id)


def save_state(engine: Engine, state: SchedState, name: str = JOB_NAME) -> None:
    with session_scope(engine) as s:
        row = s.get(SchedulerState, name) or SchedulerState(name=name)
        row.next_run_at = state.due_at
        row.last_run_at, row.last_run_id = state.last_run_at, state.last_run_id
        row.last_skip_reason, row.consecutive_skips = state.last_skip_reason, state.consecutive_skips
        row.updated_at = utcnow()
        s.add(row)


def record_skip(engine: Engine, trigger: str, reason: str) -> DreamRun:
    """A `skipped_busy` run row, so `dreamer runs ls` shows the skips too."""
    with session_scope(engine) as s:
        run = DreamRun(trigger=trigger, status=RunStatus.SKIPPED_BUSY, error=reason, finished_at=utcnow())
        s.add(run)
    return run


def scheduler_status(engine: Engine, name: str = JOB_NAME) -> dict[str, str | None]:
    """The `dreamer status` lines for the scheduler (None when no daemon ever ran)."""
    with session_scope(engine) as s:
        row = s.get(SchedulerState, name)
    if row is None:
        return {"scheduler_next_run": None, "scheduler_last_run": None, "scheduler_last_skip": None}
    skip = row.last_skip_reason
    if skip and row.consecutive_skips:
        skip = f"{skip} ({row.consecutive_skips} skip(s) in a row)"
    last = row.last_run_at.isoformat() if row.last_run_at else None
    if last and row.last_run_id is not None:
        last = f"{last} (run {row.last_run_id})"
    return {
        "scheduler_next_run": row.next_run_at.isoformat() if row.next_run_at else None,
        "scheduler_last_run": last,
        "scheduler_last_skip": skip,
    }
