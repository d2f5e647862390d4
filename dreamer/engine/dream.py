"""The dream pass: due sessions -> new messages -> extraction -> consolidation -> one
transaction per session (memories, history, cursor) -> index via the outbox -> Markdown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dreamer.core.errors import BudgetExceeded, CircuitOpen
from dreamer.core.models import DreamRun, Session, utcnow
from dreamer.core.private import check_free_space
from dreamer.engine import outbox
from dreamer.engine.due import DueRules, due_sessions, session_groups
from dreamer.engine.extract import Extractor, LLMExtractor
from dreamer.engine.failures import count_timeouts
from dreamer.engine.group import dream_apart
from dreamer.engine.pace import Pace
from dreamer.engine.rules import RulesExtractor
from dreamer.engine.runs import Tally, finish_skipped, run_id, run_owner, save_run, start_run
from dreamer.engine.runtime import Runtime
from dreamer.llm.guard import GuardedLLM
from dreamer.store import leases
from dreamer.store.busy import busy_or_unreachable
from dreamer.store.db import session_scope

BECAME_BUSY = "the agent became busy"  # how a run row says the pass stopped for a busy agent
LOCKED_OUT = "left due: another writer kept their user's consolidation lock"  # and sessions it left for that


def dream_pass(
    rt: Runtime,
    *,
    trigger: str = "manual",
    session_ids: list[int] | None = None,
    user_id: str | None = None,
    force: bool = False,
    busy_checked: bool = False,
    now: datetime | None = None,
    stop: Callable[[], bool] | None = None,
) -> DreamRun:
    """Run one pass and return its `dream_runs` row; `NoSpace`, before anything is written, when
    the data folder's disk has less than `min_free_mb` free. `stop()` is asked between sessions, and
    (unless `force`) whether the agent is busy: at the start, unless the caller has just found
    it idle at `now` (`busy_checked`), and between sessions."""
    check_free_space(rt.settings.data_dir, rt.settings.min_free_mb)  # before anything is written, a run row too
    started = utcnow()
    at = now or started
    if not (force or busy_checked) and (reason := rt.busy.busy_reason(at)):
        return finish_skipped(rt, trigger, reason)
    leases.sweep_abandoned_runs(rt.engine)
    llm = _guarded(rt)
    extractor = _extractor(rt, llm)
    run = start_run(rt, trigger, extractor.name)
    lease = leases.RunLease(rt.engine, run_id(run), run_owner(run), rt.settings.lease_seconds)
    tally = Tally()
    try:
        outbox.drain(rt)
        with session_scope(rt.engine) as s:
            due = due_sessions(s, DueRules.from_settings(rt.settings), at, session_ids=session_ids, user_id=user_id)
        pace = Pace(lambda: _halted(rt, run, stop, None if force else at + (utcnow() - started)), lease)
        groups = session_groups([sess for sess, _cursor in due], rt.settings.sessions_per_call)
        _dream_groups(rt, groups, extractor, llm, run, tally, pace)
        lease.keep_alive()
        count_timeouts(rt, llm, tally.timed_out, may_probe=run.status == "running" and not run.error)
        outbox.drain(rt)  # and every due view rendered, once per user
    except BaseException as exc:
        run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
        save_run(rt, run, tally, llm)
        raise
    if tally.locked_out:
        run.error = "; ".join(filter(None, [run.error, f"{tally.locked_out} session(s) {LOCKED_OUT}"]))
    if run.status == "running":
        run.status = "ok" if not (run.failed_sessions or tally.locked_out) else "partial"
    return save_run(rt, run, tally, llm)


def _dream_groups(
    rt: Runtime,
    groups: list[list[Session]],
    extractor: Extractor,
    llm: GuardedLLM | None,
    run: DreamRun,
    tally: Tally,
    pace: Pace,
) -> None:
    """Each group of due sessions in turn, until the pass is halted or the breaker or the
    budget stops it."""
    for group in groups:
        if pace.halted():
            break
        if group[0].user_id in tally.locked_users:  # not extracted only to wait for the lock again
            tally.locked_out += len(group)
            continue
        pace.run_lease.keep_alive()
        try:
            if dream_apart(rt, group, extractor, llm, run, tally, pace):
                break
        except (CircuitOpen, BudgetExceeded) as exc:
            run.status, run.error = "stopped", str(exc)
            break


def _halted(rt: Runtime, run: DreamRun, stop: Callable[[], bool] | None, busy_at: datetime | None) -> bool:
    """Whether the pass stops before its next session: `stop()` asks it to, or (unless forced,
    `busy_at` None) the agent is busy at `busy_at`. Says why on the run row."""
    if stop is not None and stop():
        run.error = "stopped on request"
        return True
    if busy_at is not None and (reason := busy_or_unreachable(rt.busy, busy_at)):
        run.status, run.error = "stopped", f"{BECAME_BUSY}: {reason}"
        return True
    return False


def locked_out(run: DreamRun) -> bool:
    """Whether the pass left sessions due because another writer kept their user's lock."""
    return run.status == "partial" and (run.error or "").endswith(LOCKED_OUT)


def stopped_busy(run: DreamRun) -> bool:
    """Whether the pass stopped before its last session because the agent became busy."""
    return run.status == "stopped" and (run.error or "").startswith(BECAME_BUSY)


def _guarded(rt: Runtime) -> GuardedLLM | None:
    """The runtime's model behind the pass's token budget and circuit breaker, if it has one."""
    if rt.llm is None:
        return None
    st = rt.settings
    return GuardedLLM(rt.llm, token_budget=st.llm_pass_token_budget, breaker_threshold=st.llm_breaker_threshold)


def _extractor(rt: Runtime, llm: GuardedLLM | None) -> Extractor:
    if llm is None:
        return RulesExtractor(limit=rt.settings.entries_per_session)
    return LLMExtractor(llm, limit=rt.settings.entries_per_session)
