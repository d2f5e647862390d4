"""The dream pass: due sessions -> new messages -> extraction -> consolidation -> one
transaction per session (memories, history, cursor) -> index via the outbox -> Markdown."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from dreamer.core.errors import BudgetExceeded, CircuitOpen
from dreamer.core.models import DreamRun, Session, utcnow
from dreamer.core.private import check_free_space
from dreamer.core.run_status import RunStatus
from dreamer.engine import outbox
from dreamer.engine.busy_scope import all_due_busy, busy_now
from dreamer.engine.consolidation.judge import Judge, LLMJudge
from dreamer.engine.due import DueRules, due_sessions, session_groups
from dreamer.engine.extraction.extract import Extractor, LLMExtractor, check_fits
from dreamer.engine.failures import count_timeouts
from dreamer.engine.group import dream_apart
from dreamer.engine.pace import Pace
from dreamer.engine.rules.extractor import RulesExtractor
from dreamer.engine.runs import OnStep, Pass, StopCause, finish_skipped, run_id, run_owner, start_run
from dreamer.engine.runtime import UNSET, Runtime, Unset
from dreamer.llm.guard import GuardedLLM
from dreamer.store import leases
from dreamer.store.db import session_scope

BECAME_BUSY = "the agent became busy"  # how a run row says the pass stopped: nobody can tell who is idle
LEFT_BUSY = "left due: their owner is busy"  # and sessions it left for their busy user or agent
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
    extractor: Extractor | None = None,
    judge: Judge | None | Unset = UNSET,
    on_step: OnStep | None = None,
) -> DreamRun:
    """Run one pass and return its `dream_runs` row (`NoSpace` first when the disk is short). `force`
    takes quiet-pending and short sessions at once, busy or not; else a busy owner's sessions are
    left due (`_Watch`), and unless `busy_checked` a pass whose due sessions' owners are all busy
    is skipped. `extractor`/`judge` default to the model's, else rules and no judge; `on_step` is
    told after each session and model call (`PassStep`). `run_pass` runs one and gives the whole `Pass`."""
    if not (force or busy_checked):
        check_free_space(rt.settings.data_dir, rt.settings.min_free_mb)  # before the skipped pass's row too
        if reason := all_due_busy(rt, now or utcnow(), session_ids=session_ids, user_id=user_id):
            return finish_skipped(rt, trigger, reason)
    return run_pass(
        rt,
        trigger=trigger,
        session_ids=session_ids,
        user_id=user_id,
        force=force,
        now=now,
        stop=stop,
        extractor=extractor,
        judge=judge,
        on_step=on_step,
    ).run


def run_pass(
    rt: Runtime,
    *,
    trigger: str = "manual",
    session_ids: list[int] | None = None,
    user_id: str | None = None,
    force: bool = False,
    now: datetime | None = None,
    stop: Callable[[], bool] | None = None,
    extractor: Extractor | None = None,
    judge: Judge | None | Unset = UNSET,
    on_step: OnStep | None = None,
) -> Pass:
    """`dream_pass` for a caller that found the owners idle or `force`s it: the `Pass`, saved,
    whose fields say why it stopped early or left sessions due (`Pass.stopped_busy`, `Pass.left_locked`)."""
    check_free_space(rt.settings.data_dir, rt.settings.min_free_mb)  # before anything is written, a run row too
    started = utcnow()
    at = now or started
    leases.sweep_abandoned_runs(rt.engine)
    llm = _guarded(rt)
    extractor = _fitted(extractor or _extractor(rt, llm))
    judging = (LLMJudge(llm) if llm is not None else None) if judge is UNSET else judge
    run = start_run(rt, trigger, extractor.name)
    run_lease = leases.RunLease(rt.engine, run_id(run), run_owner(run), rt.settings.lease_seconds)
    p = Pass(run, llm, Pace(_never, run_lease), on_step=on_step)
    if llm is not None:
        llm.on_call = p.step
    watch = _Watch(rt, p, stop, None if force else lambda: at + (utcnow() - started))
    due = partial(_due, rt, at, session_ids, user_id, force)
    with leases.Heartbeat(rt.engine, p.owner):
        _run(rt, p, due, (extractor, judging), watch)
    return p


def _due(rt: Runtime, at: datetime, session_ids: list[int] | None, user_id: str | None, force: bool) -> list[Session]:
    """The sessions the pass takes (`due_sessions`), oldest first."""
    with session_scope(rt.engine) as s:
        rules = DueRules.from_settings(rt.settings)
        return [
            sess for sess, _cursor in due_sessions(s, rules, at, session_ids=session_ids, user_id=user_id, forced=force)
        ]


def _run(
    rt: Runtime, p: Pass, due: Callable[[], list[Session]], readers: tuple[Extractor, Judge | None], watch: _Watch
) -> None:
    """The pass's due sessions dreamed, its timeouts counted, its row saved (failed, if it raised)."""
    run, llm = p.run, p.llm
    try:
        outbox.drain(rt)
        sessions = due()
        p.total = len(sessions)
        p.step()
        groups = session_groups(sessions, rt.settings.sessions_per_call)
        _dream_groups(rt, groups, readers, p, watch)
        p.pace.run_lease.keep_alive()
        count_timeouts(rt, llm, p.tally.timed_out, may_probe=p.stopped_by is None)
        outbox.drain(rt)  # and every due view rendered, once per user
    except BaseException as exc:
        run.status, run.error = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        p.save(rt)
        raise
    _close(p)
    p.save(rt)


def _never() -> bool:
    return False


def _close(p: Pass) -> None:
    """The run row's note says which sessions were left due and why; a run still running ends ok,
    or partial when sessions failed or were left due."""
    run, tally = p.run, p.tally
    if tally.busy_left:
        run.error = "; ".join(filter(None, [run.error, f"{tally.busy_left} session(s) {LEFT_BUSY} ({tally.busy_why})"]))
    if tally.locked_out:
        run.error = "; ".join(filter(None, [run.error, f"{tally.locked_out} session(s) {LOCKED_OUT}"]))
    if tally.leased_out:
        run.error = "; ".join(filter(None, [run.error, f"{'; '.join(tally.leased_out)}: left to that worker"]))
    if run.status == RunStatus.RUNNING:
        run.status = RunStatus.PARTIAL if run.failed_sessions or tally.locked_out or tally.busy_left else RunStatus.OK


@dataclass
class _Watch:
    """What the pass asks between its steps: whether it is to stop (asked to, or the busy signal
    is out of reach: nobody can tell who is idle), and whether one owner is busy (`busy_at`
    None: a forced pass, never). Says why on the pass (`Pass.stop`)."""

    rt: Runtime
    p: Pass
    stop: Callable[[], bool] | None
    busy_at: Callable[[], datetime] | None
    ended: bool = False  # the whole pass stops
    why: str | None = None  # why `owner` was last found busy

    def halted(self, owner: Session) -> bool:
        """Whether the group of `owner` stops before its next step: the pass is to stop, or
        `owner` is busy (`why` says why)."""
        if self.stop is not None and self.stop():
            self.p.stop(StopCause.REQUESTED, "stopped on request")
            self.ended = True
            return True
        if self.busy_at is None:
            return False
        now = busy_now(self.rt.busy, self.busy_at())
        if now.everyone:
            self.p.stop(StopCause.BUSY, f"{BECAME_BUSY}: {now.everyone}")
            self.ended = True
        self.why = now.reason(owner)
        return self.why is not None


def _dream_groups(
    rt: Runtime, groups: list[list[Session]], readers: tuple[Extractor, Judge | None], p: Pass, watch: _Watch
) -> None:
    """Each group of due sessions in turn, until the pass is stopped or the breaker or the
    budget stops it; a group whose owner is busy is left due, before it starts or between its
    sessions, and the pass goes on with the next."""
    tally = p.tally
    for group in groups:
        owner = group[0]
        if watch.halted(owner):
            if watch.ended:
                break
            tally.busy_left, tally.busy_why = tally.busy_left + len(group), watch.why
            continue
        if owner.user_id in tally.locked_users:  # not extracted only to wait for the lock again
            tally.locked_out += len(group)
            continue
        p.pace.run_lease.keep_alive()
        done = p.run.sessions + p.run.failed_sessions
        p.pace = replace(p.pace, halted=partial(watch.halted, owner))  # asked between the group's steps
        try:
            halted = dream_apart(rt, group, readers, p)
        except (CircuitOpen, BudgetExceeded) as exc:
            p.stop(StopCause.GUARD, str(exc))
            break
        p.step()
        if halted and watch.ended:
            break
        if halted:  # its owner became busy between two of its sessions
            left = len(group) - (p.run.sessions + p.run.failed_sessions - done)
            tally.busy_left, tally.busy_why = tally.busy_left + left, watch.why


def _guarded(rt: Runtime) -> GuardedLLM | None:
    """The runtime's model behind the pass's token budget and circuit breaker, if it has one."""
    if rt.llm is None:
        return None
    st = rt.settings
    return GuardedLLM(rt.llm, token_budget=st.llm_pass_token_budget, breaker_threshold=st.llm_breaker_threshold)


def _fitted(extractor: Extractor) -> Extractor:
    """`extractor`, once a model's is known to fit its window: one clear error before any
    session, never a failure per session."""
    if isinstance(extractor, LLMExtractor):
        check_fits(extractor)
    return extractor


def _extractor(rt: Runtime, llm: GuardedLLM | None) -> Extractor:
    if llm is None:
        return RulesExtractor(limit=rt.settings.entries_per_session)
    return LLMExtractor(llm, limit=rt.settings.entries_per_session)
