"""A group of consecutive sessions of one owner in the pass: each leased, their new messages
extracted together; then, with a model, planned as one batch (one judgement call) and applied and
indexed in turn under one hold of their user's consolidation lock; without one, each planned,
applied and indexed in turn."""

from __future__ import annotations

import logging

from dreamer.core.errors import LeaseLost, LLMTimeout
from dreamer.core.models import DreamRun, Session
from dreamer.engine import outbox
from dreamer.engine.code_work.dream import propose_entries
from dreamer.engine.consolidation.apply import apply_session
from dreamer.engine.consolidation.judge import Judge
from dreamer.engine.consolidation.plan import plan_group, plan_session, session_plan
from dreamer.engine.extraction.extract import Candidate, Extractor
from dreamer.engine.extraction.group import STOPS, Capped, Cut, Extracted, extract_group
from dreamer.engine.failures import TimedOut, counts_as_its_own, is_global, record_failure
from dreamer.engine.load import Work, load_work, session_id
from dreamer.engine.pace import Pace, lease_lost
from dreamer.engine.runs import Tally, run_owner
from dreamer.engine.runtime import Runtime
from dreamer.llm.guard import GuardedLLM
from dreamer.store import leases
from dreamer.store.user_locks import Hold, UserLocked

log = logging.getLogger(__name__)

OVER_CAP = "over the per-session cap"  # why a grounded candidate past `entries_per_session` is rejected


def dream_group(
    rt: Runtime,
    group: list[Session],
    readers: tuple[Extractor, Judge | None],
    llm: GuardedLLM | None,
    run: DreamRun,
    tally: Tally,
    pace: Pace,
) -> bool:
    """Consecutive sessions of one owner: their new messages extracted together (short sessions
    share calls); then planned as one batch when there is a judge (`_finish_together`), else each
    session planned, applied and indexed in turn; either way a later session's neighbours include
    what an earlier one added. Each session is leased for the whole group. True when the pass was
    halted between two of its sessions (the rest keep their cursors). `readers`: the extractor,
    and the judge of routed pairs (None: no judge)."""
    extractor, judge = readers
    owner = run_owner(run)
    held: dict[int, leases.HeldLease] = {}
    try:
        works = [w for w in (_lease_and_load(rt, sess, owner, held, run, tally) for sess in group) if w is not None]
        if not works:
            return False
        results = extract_group(rt, works, extractor, held, pace)
        if judge is not None and len(works) > 1:
            return _finish_together(rt, works, results, (llm, judge), run, tally, held, pace)
        for k, (work, found) in enumerate(zip(works, results)):
            if isinstance(found, STOPS):
                raise found  # cut short: it and every later session keep their cursors
            if found is Cut.HALTED or (k and pace.halted()):
                return True
            pace.run_lease.keep_alive()
            _finish_session(rt, work, found, (llm, judge), run, tally, held[session_id(work.session)])
        return False
    finally:
        for lease in held.values():
            leases.release(rt.engine, lease.name, owner)


def dream_apart(
    rt: Runtime,
    group: list[Session],
    readers: tuple[Extractor, Judge | None],
    llm: GuardedLLM | None,
    run: DreamRun,
    tally: Tally,
    pace: Pace,
) -> bool:
    """`dream_group`; when the group fails for a reason that is not `is_global` (what one of its
    sessions holds), each session of it is dreamed again alone, so the failure is that session's
    only: recorded on its cursor and counted toward its quarantine. The sessions applied before
    the failure are caught up and not read again. True when the pass was halted."""
    try:
        return dream_group(rt, group, readers, llm, run, tally, pace)
    except Exception as exc:
        if is_global(exc):
            raise
        if len(group) == 1:
            _failed(rt, group[0], exc, run, tally, llm)
            return False
        log.warning("a group of %d sessions failed (%s); each is dreamed alone", len(group), exc)
    for k, sess in enumerate(group):
        if (k and pace.halted()) or dream_apart(rt, [sess], readers, llm, run, tally, pace):
            return True
    return False


def _lease_and_load(
    rt: Runtime, sess: Session, owner: str, held: dict[int, leases.HeldLease], run: DreamRun, tally: Tally
) -> Work | None:
    name = leases.session_lease(session_id(sess))
    if not leases.acquire(rt.engine, name, owner, rt.settings.lease_seconds):
        log.info("session %s is leased by another worker; skipped", sess.id)
        return None
    held[session_id(sess)] = leases.HeldLease(rt.engine, name, owner, rt.settings.lease_seconds)
    try:
        return load_work(rt, sess)
    except Exception as exc:  # what it holds cannot be read as a transcript: its failure alone
        _failed(rt, sess, exc, run, tally, None)
        return None


def _finish_session(
    rt: Runtime,
    work: Work,
    found: Capped | Exception,
    models: tuple[GuardedLLM | None, Judge | None],
    run: DreamRun,
    tally: Tally,
    held: leases.HeldLease,
) -> None:
    """Plan and apply one session's extraction (`found`: its candidates and those over the cap,
    or the error that stopped its extraction), holding its user's consolidation lock from the
    plan until the result is in the index (`user_locks`). `models`: the pass's model and judge."""
    sess, (llm, judge) = work.session, models
    if isinstance(found, Exception):
        _failed(rt, sess, found, run, tally, llm)
        return
    candidates, left_out = found
    if sess.user_id in tally.locked_users:  # an earlier session of the group waited for it already
        tally.locked_out += 1
        return
    try:
        with rt.user_locks.hold(sess.user_id) as lock:
            try:
                _still_held(held)
                planned = plan_session(rt, work, candidates, judge)
                lock.confirm()  # a lock that ran out while planning may have let another writer in
                outcomes = apply_session(rt, work, planned, run, tally)
            except UserLocked:
                raise
            except Exception as exc:  # the session's own failure unless `is_global`: nothing of it applied
                _failed(rt, sess, exc, run, tally, llm)
                return
            propose_entries(rt, work, planned, outcomes)  # code mode: candidate entries, counterexamples
            outbox.drain(rt, render=False)  # the next session's neighbours include what this one added;
            # its Markdown is rendered once, by the drain at the end of the pass
    except UserLocked as exc:  # nothing applied: the session keeps its cursor, the pass goes on
        log.warning("session %s and its user's later sessions left for a later pass: %s", sess.id, exc)
        tally.locked_out += 1
        tally.locked_users.add(sess.user_id)
        return
    _done(work, left_out, run, tally)


def _done(work: Work, left_out: list[Candidate], run: DreamRun, tally: Tally) -> None:
    """The session counted done; the candidates left out of it (ungrounded, or over the cap) rejected."""
    sess = work.session
    tally.rejected += [{"session_id": sess.id, "text": c.text, "reason": c.ungrounded or OVER_CAP} for c in left_out]
    run.sessions += 1
    run.messages += work.new_messages


def _finish_together(
    rt: Runtime,
    works: list[Work],
    results: list[Extracted],
    models: tuple[GuardedLLM | None, Judge],
    run: DreamRun,
    tally: Tally,
    held: dict[int, leases.HeldLease],
    pace: Pace,
) -> bool:
    """The group's sessions up to the first one cut short, planned as one batch (one judgement
    call for all their ambiguous pairs), then applied and indexed in turn, under one hold of
    their user's consolidation lock; then what cut the rest short, if anything. True when the
    pass was halted. `models`: the pass's model and judge."""
    llm = models[0]
    cut = next((k for k, r in enumerate(results) if isinstance(r, STOPS) or r is Cut.HALTED), len(results))
    ready: list[tuple[Work, Capped]] = []
    for work, found in zip(works[:cut], results[:cut]):
        if isinstance(found, Exception):
            _failed(rt, work.session, found, run, tally, llm)
        elif not isinstance(found, Cut):
            ready.append((work, found))
    user = works[0].session.user_id
    if ready and user in tally.locked_users:
        tally.locked_out += len(ready)
    elif ready:
        try:
            with rt.user_locks.hold(user) as lock:
                if _plan_and_apply(rt, ready, models, run, tally, held, pace, lock):
                    return True
        except UserLocked as exc:
            log.warning("sessions of user %s left for a later pass: %s", user, exc)
            tally.locked_out += len(ready)
            tally.locked_users.add(user)
    stop = results[cut] if cut < len(results) else None
    if isinstance(stop, STOPS):
        raise stop
    return stop is Cut.HALTED


def _plan_and_apply(
    rt: Runtime,
    ready: list[tuple[Work, Capped]],
    models: tuple[GuardedLLM | None, Judge],
    run: DreamRun,
    tally: Tally,
    held: dict[int, leases.HeldLease],
    pace: Pace,
    lock: Hold,
) -> bool:
    """Plan the sessions as one batch, then apply each in turn (its part of the batch naming
    what the sessions before it became); a session whose lease was lost is dropped. True when
    the pass was halted between two sessions (the rest keep their cursors)."""
    llm, judge = models
    live = []
    for work, found in ready:
        if (lost := lease_lost(held[session_id(work.session)])) is not None:
            _failed(rt, work.session, lost, run, tally, llm)  # dropped
        else:
            live.append((work, found))
    try:
        batch = plan_group(rt, [w for w, _ in live], [f[0] for _, f in live], judge)
        lock.confirm()  # a lock that ran out while planning may have let another writer in
    except UserLocked:
        raise
    except Exception as exc:  # each session's failure unless `is_global`
        for work, _ in live:
            _failed(rt, work.session, exc, run, tally, llm)  # the breaker, the budget, the store stop the pass
        return False
    start = 0
    for i, (work, (candidates, left_out)) in enumerate(live):
        if i and pace.halted():
            return True
        part = session_plan(batch, start, start + len(candidates))  # after the sessions before it applied
        start += len(candidates)
        pace.run_lease.keep_alive()
        if (lost := lease_lost(held[session_id(work.session)])) is not None:
            _failed(rt, work.session, lost, run, tally, llm)
            continue
        propose_entries(rt, work, part, apply_session(rt, work, part, run, tally))
        outbox.drain(rt, render=False)
        _done(work, left_out, run, tally)
    return False


def _failed(rt: Runtime, sess: Session, exc: Exception, run: DreamRun, tally: Tally, llm: GuardedLLM | None) -> None:
    """A session whose lease was lost is dropped; one that failed for a reason of its own (what
    the model made of it, or anything else that is not `is_global`) is recorded failed and counted
    toward its quarantine. A global failure (the breaker, the budget, the store) stops the pass."""
    if isinstance(exc, LeaseLost):
        log.warning(
            "session %s: its lease expired and another worker took it; this worker's work on it is dropped", sess.id
        )
        return
    if is_global(exc):
        raise exc
    recorded = record_failure(rt, session_id(sess), f"{type(exc).__name__}: {exc}", counted=counts_as_its_own(exc))
    if isinstance(exc, LLMTimeout) and recorded is not None and llm is not None:
        tally.timed_out.append(TimedOut(session_id(sess), recorded, llm.answered))
    run.failed_sessions += 1


def _still_held(held: leases.HeldLease) -> None:
    if (lost := lease_lost(held)) is not None:
        raise lost
