"""A group of consecutive sessions of one owner in the pass: each leased, their new messages
extracted together; then, with a model, planned as one batch (one judgement call) and applied and
indexed in turn under one hold of their user's consolidation lock; without one, each planned,
applied and indexed in turn."""

from __future__ import annotations

import logging

from dreamer.core.models import Session, utcnow
from dreamer.engine import outbox
from dreamer.engine.code_work.dream import propose_entries
from dreamer.engine.consolidation.apply import apply_session
from dreamer.engine.consolidation.judge import Judge
from dreamer.engine.consolidation.plan import plan_group, plan_session, session_plan
from dreamer.engine.extraction.extract import Extractor
from dreamer.engine.extraction.group import STOPS, Capped, Cut, Extracted, extract_group
from dreamer.engine.extraction.screen import screen_found
from dreamer.engine.failures import is_global
from dreamer.engine.load import Work, load_work, session_id
from dreamer.engine.pace import lease_lost
from dreamer.engine.runs import Pass
from dreamer.engine.runtime import Runtime
from dreamer.store import leases
from dreamer.store.user_locks import Hold, UserLocked

log = logging.getLogger(__name__)


def dream_group(rt: Runtime, group: list[Session], readers: tuple[Extractor, Judge | None], p: Pass) -> bool:
    """Consecutive sessions of one owner: their new messages extracted together (short sessions
    share calls); then planned as one batch when there is a judge (`_finish_together`), else each
    session planned, applied and indexed in turn; either way a later session's neighbours include
    what an earlier one added. Each session is leased for the whole group. True when the pass was
    halted between two of its sessions (the rest keep their cursors). `readers`: the extractor,
    and the judge of routed pairs (None: no judge)."""
    extractor, judge = readers
    try:
        works = [w for w in (_lease_and_load(rt, sess, p) for sess in group) if w is not None]
        if not works:
            return False
        results = p.one_fate(screen_found(p.llm, extract_group(rt, works, extractor, p.held, p.pace)))
        if judge is not None and len(works) > 1:
            return _finish_together(rt, works, results, judge, p)
        for k, (work, found) in enumerate(zip(works, results)):
            if isinstance(found, STOPS):
                raise found  # cut short: it and every later session keep their cursors
            if found is Cut.HALTED or (k and p.pace.halted()):
                return True
            p.pace.run_lease.keep_alive()
            _finish_session(rt, work, found, judge, p)
        return False
    finally:
        p.release()


def dream_apart(rt: Runtime, group: list[Session], readers: tuple[Extractor, Judge | None], p: Pass) -> bool:
    """`dream_group`; when the group fails for a reason that is not `is_global` (what one of its
    sessions holds), each session of it is dreamed again alone, so the failure is that session's
    only: recorded on its cursor and counted toward its quarantine. The sessions applied before
    the failure are caught up and not read again. True when the pass was halted."""
    try:
        return dream_group(rt, group, readers, p)
    except Exception as exc:
        if is_global(exc):
            raise
        if len(group) == 1:
            p.failed(rt, group[0], exc)
            return False
        log.warning("a group of %d sessions failed (%s); each is dreamed alone", len(group), exc)
    for k, sess in enumerate(group):
        if (k and p.pace.halted()) or dream_apart(rt, [sess], readers, p):
            return True
    return False


def _lease_and_load(rt: Runtime, sess: Session, p: Pass) -> Work | None:
    if not p.lease(rt, sess):
        held = leases.holder(rt.engine, leases.session_lease(session_id(sess)))
        who = leases.holder_text(held, utcnow()) if held is not None else "a worker that has let it go since"
        p.tally.leased_out.append(f"session {sess.id} leased by {who}")
        log.info("session %s is leased by %s; skipped", sess.id, who)
        return None
    try:
        return load_work(rt, sess)
    except Exception as exc:  # what it holds cannot be read as a transcript: its failure alone
        p.failed(rt, sess, exc)
        return None


def _finish_session(rt: Runtime, work: Work, found: Capped | Exception, judge: Judge | None, p: Pass) -> None:
    """Plan and apply one session's extraction (`found`: its candidates and those over the cap,
    or the error that stopped its extraction), holding its user's consolidation lock from the
    plan until the result is in the index (`user_locks`). `judge`: the pass's judge of routed pairs."""
    sess = work.session
    if isinstance(found, Exception):
        p.failed(rt, sess, found)
        return
    candidates, left_out = found
    if sess.user_id in p.tally.locked_users:  # an earlier session of the group waited for it already
        p.tally.locked_out += 1
        return
    try:
        with rt.user_locks.hold(sess.user_id) as lock:
            try:
                _still_held(p.held[session_id(sess)])
                planned = plan_session(rt, work, candidates, judge)
                lock.confirm()  # a lock that ran out while planning may have let another writer in
                outcomes = apply_session(rt, work, planned, p)
            except UserLocked:
                raise
            except Exception as exc:  # the session's own failure unless `is_global`: nothing of it applied
                p.failed(rt, sess, exc)
                return
            propose_entries(rt, work, planned, outcomes)  # code mode: candidate entries, counterexamples
            outbox.drain(rt, render=False)  # the next session's neighbours include what this one added;
            # its Markdown is rendered once, by the drain at the end of the pass
    except UserLocked as exc:  # nothing applied: the session keeps its cursor, the pass goes on
        log.warning("session %s and its user's later sessions left for a later pass: %s", sess.id, exc)
        p.tally.locked_out += 1
        p.tally.locked_users.add(sess.user_id)
        return
    p.done(work, left_out)


def _finish_together(rt: Runtime, works: list[Work], results: list[Extracted], judge: Judge, p: Pass) -> bool:
    """The group's sessions up to the first one cut short, planned as one batch (one judgement
    call for all their ambiguous pairs), then applied and indexed in turn, under one hold of
    their user's consolidation lock; then what cut the rest short, if anything. True when the
    pass was halted."""
    cut = next((k for k, r in enumerate(results) if isinstance(r, STOPS) or r is Cut.HALTED), len(results))
    ready: list[tuple[Work, Capped]] = []
    for work, found in zip(works[:cut], results[:cut]):
        if isinstance(found, Exception):
            p.failed(rt, work.session, found)
        elif not isinstance(found, Cut):
            ready.append((work, found))
    user = works[0].session.user_id
    if ready and user in p.tally.locked_users:
        p.tally.locked_out += len(ready)
    elif ready:
        try:
            with rt.user_locks.hold(user) as lock:
                if _plan_and_apply(rt, ready, judge, p, lock):
                    return True
        except UserLocked as exc:
            log.warning("sessions of user %s left for a later pass: %s", user, exc)
            p.tally.locked_out += len(ready)
            p.tally.locked_users.add(user)
    stop = results[cut] if cut < len(results) else None
    if isinstance(stop, STOPS):
        raise stop
    return stop is Cut.HALTED


def _plan_and_apply(rt: Runtime, ready: list[tuple[Work, Capped]], judge: Judge, p: Pass, lock: Hold) -> bool:
    """Plan the sessions as one batch, then apply each in turn (its part of the batch naming
    what the sessions before it became); a session whose lease was lost is dropped. True when
    the pass was halted between two sessions (the rest keep their cursors)."""
    live = []
    for work, found in ready:
        if (lost := lease_lost(p.held[session_id(work.session)])) is not None:
            p.failed(rt, work.session, lost)  # dropped
        else:
            live.append((work, found))
    try:
        batch = plan_group(rt, [w for w, _ in live], [f[0] for _, f in live], judge)
        lock.confirm()  # a lock that ran out while planning may have let another writer in
    except UserLocked:
        raise
    except Exception as exc:  # each session's failure unless `is_global`
        for work, _ in live:
            p.failed(rt, work.session, exc)  # the breaker, the budget, the store stop the pass
        return False
    start = 0
    for i, (work, (candidates, left_out)) in enumerate(live):
        if i and p.pace.halted():
            return True
        part = session_plan(batch, start, start + len(candidates))  # after the sessions before it applied
        start += len(candidates)
        p.pace.run_lease.keep_alive()
        if (lost := lease_lost(p.held[session_id(work.session)])) is not None:
            p.failed(rt, work.session, lost)
            continue
        propose_entries(rt, work, part, apply_session(rt, work, part, p))
        outbox.drain(rt, render=False)
        p.done(work, left_out)
    return False


def _still_held(held: leases.HeldLease) -> None:
    if (lost := lease_lost(held)) is not None:
        raise lost
