"""The in-process daemon behind `dreamer run`: a thin APScheduler shell around the pure policy
in `dreamer.schedule`.

One interval job (first run `warmup_seconds` after start, `max_instances=1`, coalesced, with
a misfire grace) calls `DreamScheduler.tick()`. A pass skipped because every due session's
owner is busy schedules a one-off retry after the backoff instead of waiting a whole interval;
a pass that left a busy owner's sessions due (and dreamed the others) retries them likewise. SIGTERM and
SIGINT set a stop flag that the running pass polls between sessions, so the session in hand
commits its checkpoint before the process exits 0. The pass also stops between sessions when
the agent turns busy, and its rest is retried after the backoff.
"""

from __future__ import annotations

import logging
import random
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.date import DateTrigger
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy.exc import SQLAlchemyError

from dreamer.core.errors import DreamerError
from dreamer.core.models import utcnow
from dreamer.core.settings import Settings
from dreamer.engine.busy_scope import all_due_busy
from dreamer.engine.runtime import Runtime, settle
from dreamer.engine.schedule import (
    BACKOFF,
    RUN,
    Action,
    Policy,
    SchedState,
    load_state,
    next_action,
    on_backoff,
    on_cut_short,
    on_finish,
    on_start,
    record_skip,
    save_state,
)
from dreamer.engine.shared_index import end_turn
from dreamer.store.db import database_problem

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)

SignalHandlers = dict[signal.Signals, Any]  # what `signal.signal` returned, to put back

JOB_ID = "dream"
RETRY_JOB_ID = "dream-retry"


@dataclass(frozen=True)
class Ran:
    """What an executor reports: the pass's `dream_runs` id when known, and, when the pass left
    sessions for an early retry (the agent became busy, or another writer kept a user's
    consolidation lock), why."""

    run_id: int | None = None
    cut_short: str | None = None


class Executor(Protocol):
    name: str

    def __call__(self, stop: Callable[[], bool]) -> Ran:
        """Run (or hand off) one pass."""


class InlineExecutor:
    """The pass runs here, in the daemon, with the embedded index taken for its duration."""

    name = "inline"

    def __init__(self, rt: Runtime, *, clock: Callable[[], datetime] = utcnow) -> None:
        self.rt = rt
        self.clock = clock

    def __call__(self, stop: Callable[[], bool]) -> Ran:
        from dreamer.engine.dream import run_pass

        if self.rt.settings.sources:  # what the watched folders gained, first
            from dreamer.ingest.watch import ingest_sources

            ingest_sources(self.rt.engine, self.rt.settings)
        try:  # the tick found the agent idle at its now; the pass still stops if it turns busy
            dreamed = run_pass(self.rt, trigger="scheduler", now=self.clock(), stop=stop)
        finally:
            end_turn(self.rt)
        run = dreamed.run
        log.info(
            "pass %s %s: %s session(s), %s added, %s merged", run.id, run.status, run.sessions, run.added, run.merged
        )
        return Ran(run.id, run.error if dreamed.stopped_busy() or dreamed.left_locked() else None)


class CeleryExecutor:
    """The pass is enqueued as the Celery `dreamer.dream_pass` task (which fans out per session)."""

    name = "celery"

    def __init__(self, settings: Settings, app: Celery | None = None) -> None:
        if app is None:
            from workers.celery_app import make_app

            app = make_app(settings)
        self.app = app
        self.settings = settings
        self.queue = settings.celery_queue

    def __call__(self, stop: Callable[[], bool]) -> Ran:
        from workers.celery_app import enqueue

        result = enqueue(self.app, self.settings, "dreamer.dream_pass", kwargs={"trigger": "scheduler"})
        log.info("enqueued dream pass as task %s on queue %s", result.id, self.queue)
        return Ran()


class DreamScheduler:
    """The decision loop: `tick()` decides and acts; `start()` / `shutdown()` drive it with APScheduler."""

    def __init__(
        self,
        rt: Runtime,
        executor: Executor,
        *,
        clock: Callable[[], datetime] = utcnow,
        rand: Callable[[], float] = random.random,
        stop: threading.Event | None = None,
    ) -> None:
        self.rt = rt
        self.executor = executor
        self.clock = clock
        self.rand = rand
        self.stop = stop or threading.Event()
        self.policy = Policy.from_settings(rt.settings)
        self.state = load_state(rt.engine, clock(), self.policy)
        self._lock = threading.Lock()
        self._firing = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None

    # -- the decision

    def tick(self, before_run: Callable[[], None] | None = None) -> Action:
        """Decide at the clock's now; run the pass, or record a skip and the retry time."""
        now = self.clock()
        with self._lock:
            action = next_action(self.state, now, all_due_busy(self.rt, now), policy=self.policy, rand=self.rand())
            state = self._after(action, now)
            try:  # stored first, then taken: a tick the database refused changes nothing
                if action.kind == BACKOFF:
                    record_skip(self.rt.engine, "scheduler", action.reason or "busy")
                    log.info("agent busy (%s): retry in %.1f s", action.reason, action.delay)
                save_state(self.rt.engine, state)
            except SQLAlchemyError as exc:
                return self._unsaved(now, exc)
            self.state = state
        if action.kind == RUN:
            if before_run is not None:
                before_run()
            self._run()
        return action

    def _after(self, action: Action, now: datetime) -> SchedState:
        if action.kind == BACKOFF:
            return on_backoff(self.state, action, now, self.policy)
        if action.kind == RUN:
            return on_start(self.state, now, self.policy)
        return self.state

    def _unsaved(self, now: datetime, exc: SQLAlchemyError) -> Action:
        """The tick is retried after the backoff base: nothing ran and nothing was recorded."""
        delay = self.policy.backoff_base
        log.error("the schedule could not be saved (%s): trying again in %g s", database_problem(exc), delay)
        return Action(BACKOFF, at=now + timedelta(seconds=delay), delay=delay, reason="the database refused")

    def _finished(self, ran: Ran) -> SchedState:
        now = self.clock()
        cut_short = ran.cut_short if not self.stop.is_set() else None
        state = on_finish(self.state, now, ran.run_id, cut_short=bool(cut_short))
        if cut_short:
            state = on_cut_short(state, now, cut_short, policy=self.policy, rand=self.rand())
            log.info("%s: the rest of the pass is retried at %s", cut_short, state.due_at.isoformat())
        return state

    def _run(self) -> None:
        ran = Ran()
        try:
            ran = self.executor(self.stop.is_set)
        except DreamerError as exc:  # recorded on the run row by the pass; the schedule goes on
            log.error("dream pass failed: %s", exc)
        finally:
            with self._lock:
                self.state = self._finished(ran)  # not running, saved or not
                try:
                    save_state(self.rt.engine, self.state)
                except SQLAlchemyError as exc:
                    log.error("the finished pass could not be recorded in the schedule (%s)", database_problem(exc))

    # -- the APScheduler shell

    def start(self) -> BackgroundScheduler:
        sched = BackgroundScheduler(timezone=UTC)
        grace = self._grace()
        sched.add_job(
            self._fire,
            IntervalTrigger(seconds=self.policy.interval, start_date=self.state.anchor, timezone=UTC),
            id=JOB_ID,
            max_instances=1,
            coalesce=True,
            misfire_grace_time=grace,
        )
        self._scheduler = sched
        save_state(self.rt.engine, self.state)
        sched.start()
        log.info(
            "dream scheduler started (%s executor): first pass at %s, then every %g s",
            self.executor.name,
            self.state.anchor.isoformat(),
            self.policy.interval,
        )
        return sched

    def _fire(self) -> None:
        """One job run. Scheduler calls happen only before the pass and never once a stop is
        requested: `shutdown()` waits for this method while holding APScheduler's locks."""
        if not self._firing.acquire(blocking=False):
            log.info("a pass is still running; this trigger is skipped")
            return
        try:
            if self.stop.is_set():
                return
            action = self.tick(before_run=self._cancel_retry)
            retry_at = action.at if action.kind == BACKOFF else self.state.retry_at if action.kind == RUN else None
            if retry_at is not None and not self.stop.is_set():  # a busy skip, or a pass the agent cut short
                self._schedule_retry(retry_at)
        finally:
            self._firing.release()

    def _schedule_retry(self, at: datetime) -> None:
        if self._scheduler is None:
            return
        self._scheduler.add_job(
            self._fire,
            DateTrigger(run_date=at, timezone=UTC),
            id=RETRY_JOB_ID,
            replace_existing=True,
            max_instances=1,
            misfire_grace_time=self._grace(),
        )

    def _grace(self) -> int:
        """APScheduler wants whole seconds."""
        return max(1, round(self.rt.settings.scheduler_misfire_grace_seconds))

    def _cancel_retry(self) -> None:
        if self._scheduler is None:
            return
        try:
            self._scheduler.remove_job(RETRY_JOB_ID)
        except JobLookupError:
            pass

    def shutdown(self) -> None:
        """Ask the running pass to stop after its session, wait for it, then stop APScheduler."""
        self.stop.set()
        with self._firing:
            if self._scheduler is not None and self._scheduler.running:
                self._scheduler.shutdown(wait=True)


def build_executor(name: str, rt: Runtime) -> Executor:
    if name == "inline":
        return InlineExecutor(rt)
    if name == "celery":
        return CeleryExecutor(rt.settings)
    raise DreamerError(f"unknown executor {name!r}: use inline or celery")


def run_daemon(settings: Settings, *, executor: str | None = None, poll: float = 0.5) -> int:
    """`dreamer run`: schedule passes until SIGTERM or SIGINT, then finish the session in hand."""
    from dreamer.engine.shared_index import open_shared_runtime
    from dreamer.engine.view_watch import ViewWatcher

    name = executor or settings.scheduler_executor
    stop = threading.Event()
    rt = open_shared_runtime(settings) if name == "inline" else Runtime.open(settings)
    settle(rt, load_model=name == "inline")  # with celery, the workers embed, not this process
    previous = _install_signals(stop)
    daemon = DreamScheduler(rt, build_executor(name, rt), stop=stop)
    watcher = ViewWatcher(rt, settings.view_poll_seconds)  # a person's edits of the Markdown, read back
    try:
        daemon.start()
        watcher.start()
        while not stop.wait(poll):
            pass
        log.info("stop requested: finishing the session in hand")
    finally:
        watcher.stop()
        daemon.shutdown()
        rt.close()
        _restore_signals(previous)
    return 0


def _install_signals(stop: threading.Event) -> SignalHandlers:
    def handler(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s", signal.Signals(signum).name)
        stop.set()

    return {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}


def _restore_signals(previous: SignalHandlers) -> None:
    for sig, handler in previous.items():
        signal.signal(sig, handler)
