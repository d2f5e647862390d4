"""The pass under way (`Pass`: its `dream_runs` row, its counts, its model and its leases) and
its row: started with its run lease, its counts tallied, saved at the end with the model's
usage, the run lease released."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, TypedDict

from sqlmodel import col, select

from dreamer.core.consolidate import content_hash
from dreamer.core.errors import LeaseLost, LLMTimeout
from dreamer.core.models import Cursor, DreamRun, Lease, Session, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.engine.consolidation.guard import PassGuard
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.failures import TimedOut, counts_as_its_own, is_global, record_failure
from dreamer.engine.load import Work, session_id
from dreamer.engine.pace import Pace
from dreamer.engine.runtime import Runtime
from dreamer.llm.guard import GuardedLLM
from dreamer.store import leases
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)


class Rejection(TypedDict):
    """A candidate the pass did not store, as the run row lists it."""

    session_id: int | None
    text: str
    reason: str


DROPPED = "dropped from the model's reply"
OVER_CAP = "over the per-session cap"  # why a grounded candidate past `entries_per_session` is rejected


@dataclass
class Tally:
    """What the pass did so far, for its run row."""

    candidates: int = 0
    added: int = 0
    merged: int = 0
    superseded: int = 0
    held: int = 0  # supersedes and forgets the guard held for a person
    rejected: list[Rejection] = field(default_factory=list)
    locked_out: int = 0  # sessions left due: another writer kept their user's consolidation lock
    locked_users: set[str] = field(
        default_factory=set
    )  # whose lock was kept: their later sessions wait for the next pass
    busy_left: int = 0  # sessions left due: their user or agent was busy
    busy_why: str | None = None  # why the last of them was
    timed_out: list[TimedOut] = field(default_factory=list)  # counted at the end if the endpoint answered after them
    leased_out: list[str] = field(default_factory=list)  # sessions another live worker holds: who holds each
    guard: PassGuard | None = None  # made from the settings when the pass first applies a session
    fates: dict[str, str | None] = field(default_factory=dict)  # by content hash: why a text was refused, None kept


class StopCause(StrEnum):
    """Why a pass stopped before its last session (its run row's `error` says it to a person)."""

    REQUESTED = "requested"  # asked to stop: the run still ends ok or partial
    BUSY = "busy"  # the agent became busy: nobody can tell who is idle (the run is stopped)
    GUARD = "guard"  # the model's circuit breaker opened or the token budget is spent (the run is stopped)


@dataclass(frozen=True)
class PassStep:
    """How far a pass has come, as a progress bar shows it: sessions done (dreamed or failed) of
    those it took, and the model's calls and tokens so far."""

    sessions: int
    total: int
    calls: int
    tokens: int


OnStep = Callable[[PassStep], None]


@dataclass
class Pass:
    """One pass under way: its run row, its counts, the model behind its budget and breaker (None:
    rules), what the group under way asks between its steps (`pace`, with the run lease) and the
    leases held on that group's sessions. Why it stopped early is a field (`stopped_by`), as are
    the sessions it left due (the tally's): the run row's `error` is a note, never read back."""

    run: DreamRun
    llm: GuardedLLM | None
    pace: Pace
    tally: Tally = field(default_factory=Tally)
    held: dict[int, leases.HeldLease] = field(default_factory=dict)  # by session id
    stopped_by: StopCause | None = None
    on_step: OnStep | None = None  # told after each session and each model call
    total: int = 0  # the sessions the pass took

    def step(self) -> None:
        """Tell `on_step` how far the pass has come."""
        if self.on_step is not None:
            calls, tokens = (self.llm.calls, self.llm.usage.total_tokens) if self.llm is not None else (0, 0)
            self.on_step(PassStep(self.run.sessions + self.run.failed_sessions, self.total, calls, tokens))

    @property
    def owner(self) -> str:
        return run_owner(self.run)

    def stop(self, cause: StopCause, note: str) -> None:
        """The pass stops before its next session, for `cause`; `note` says why on the run row."""
        self.stopped_by, self.run.error = cause, note
        if cause is not StopCause.REQUESTED:
            self.run.status = RunStatus.STOPPED

    def left_locked(self) -> bool:
        """Whether the pass left sessions due because another writer kept their user's lock."""
        return self.run.status == RunStatus.PARTIAL and self.tally.locked_out > 0

    def stopped_busy(self) -> bool:
        """Whether the pass left sessions due for a busy owner, or stopped before its last session
        because nobody could tell who is idle."""
        if self.run.status == RunStatus.STOPPED:
            return self.stopped_by is StopCause.BUSY
        return self.run.status == RunStatus.PARTIAL and self.tally.busy_left > 0

    def lease(self, rt: Runtime, sess: Session) -> bool:
        """Lease `sess` for the group under way; False when another worker has it (one that runs,
        and beats)."""
        sid = session_id(sess)
        name, ttl = leases.session_lease(sid), rt.settings.lease_seconds
        if not leases.acquire(rt.engine, name, self.owner, ttl, beat=True):
            return False
        self.held[sid] = leases.HeldLease(rt.engine, name, self.owner, ttl, beat=True)
        return True

    def release(self) -> None:
        """Give back the leases on the sessions of the group under way."""
        for lease in self.held.values():
            leases.release(lease.engine, lease.name, lease.owner)
        self.held = {}

    def done(self, work: Work, left_out: list[Candidate]) -> None:
        """The session counted done; the candidates left out of it (ungrounded, or over the cap) rejected."""
        sess = work.session
        self.tally.rejected += [
            {"session_id": sess.id, "text": c.text, "reason": c.ungrounded or OVER_CAP} for c in left_out
        ]
        self.run.sessions += 1
        self.run.messages += work.new_messages

    def one_fate(self, found: list[Any]) -> list[Any]:
        """Each session's (kept, left out) candidates of a group (errors and cuts as they are), in
        order, given the one fate each text has in the run (`one_fate`)."""
        return [one_fate(self.tally.fates, *f) if isinstance(f, tuple) else f for f in found]

    def failed(self, rt: Runtime, sess: Session, exc: Exception) -> None:
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
        error = f"{type(exc).__name__}: {exc}"
        recorded = record_failure(rt, session_id(sess), error, counted=counts_as_its_own(exc))
        if isinstance(exc, LLMTimeout) and recorded is not None and self.llm is not None:
            self.tally.timed_out.append(TimedOut(session_id(sess), recorded, self.llm.answered))
        self.run.failed_sessions += 1

    def save(self, rt: Runtime) -> DreamRun:
        """The run row saved with its counts and the model's usage (`save_run`)."""
        return save_run(rt, self.run, self.tally, self.llm)


def one_fate(
    fates: dict[str, str | None], kept: list[Candidate], left_out: list[Candidate]
) -> tuple[list[Candidate], list[Candidate]]:
    """A session's candidates (`kept` for planning, `left_out` with why) once each text has one
    fate in a run: a text refused (ungrounded, over the cap) where it first came is refused again,
    for the same reason, where it comes later; one kept where it first came is not listed as
    refused by a later session (the run stores it). So no text is both rejected and added in one
    run. `fates` (content hash -> the reason a text was refused, None: kept) is updated."""
    out_kept: list[Candidate] = []
    out_left: list[Candidate] = []
    for cand in left_out:
        key = content_hash(cand.text)
        if key in fates and fates[key] is None:
            continue  # stored by this run from an earlier session
        fates.setdefault(key, cand.ungrounded or OVER_CAP)
        out_left.append(cand)
    for cand in kept:
        key = content_hash(cand.text)
        if (reason := fates.setdefault(key, None)) is not None:
            out_left.append(cand.model_copy(update={"ungrounded": reason}))
        else:
            out_kept.append(cand)
    return out_kept, out_left


def run_id(run: DreamRun) -> int:
    """The id of a run row already written."""
    if run.id is None:
        raise ValueError("the run row is not written yet")
    return run.id


def run_owner(run: DreamRun) -> str:
    """Who holds the run's leases: this host, process and run."""
    return f"{socket.gethostname()}:{os.getpid()}:{run.id}"


def start_run(rt: Runtime, trigger: str, extractor: str) -> DreamRun:
    """The run row and its run lease, in one transaction: no sweep ever sees one without the other."""
    with session_scope(rt.engine) as s:
        run = DreamRun(trigger=trigger, status=RunStatus.RUNNING, extractor=extractor)
        s.add(run)
        s.flush()
        now = utcnow()
        expires = now + timedelta(seconds=rt.settings.lease_seconds)
        s.add(Lease(name=leases.run_lease(run_id(run)), owner=run_owner(run), expires_at=expires, heartbeat_at=now))
    return run


def finish_skipped(rt: Runtime, trigger: str, reason: str) -> DreamRun:
    """The row of a pass that did not start: the agent was busy."""
    with session_scope(rt.engine) as s:
        run = DreamRun(trigger=trigger, status=RunStatus.SKIPPED_BUSY, error=reason, finished_at=utcnow())
        s.add(run)
    return run


def save_run(rt: Runtime, run: DreamRun, tally: Tally, llm: GuardedLLM | None) -> DreamRun:
    """The run row with its counts and the model's usage, finished; its run lease released."""
    if llm is not None:  # what the model wrote that could not be read as an item, each with why
        tally.rejected += [{"session_id": None, "text": d, "reason": DROPPED} for d in llm.usage.dropped]
    run.candidates, run.added, run.merged = tally.candidates, tally.added, tally.merged
    run.superseded, run.rejected, run.rejections = tally.superseded, len(tally.rejected), tally.rejected
    run.held = tally.held
    if llm is not None:
        settle(llm, wait=run.status != RunStatus.FAILED)
        run.llm_calls, run.unbilled_calls = llm.calls, llm.usage.unbilled
        run.prompt_tokens, run.completion_tokens = llm.usage.prompt_tokens, llm.usage.completion_tokens
    run.finished_at = utcnow()
    with session_scope(rt.engine) as s:
        s.add(run)
    leases.release(rt.engine, leases.run_lease(run_id(run)), run_owner(run))
    return run


def settle(llm: GuardedLLM, *, wait: bool) -> None:
    """The pass's bill made the server's for the calls that timed out and answered since; with
    `wait`, each still out is waited for until it is given up (the server is at work on it: a
    call after it would wait as long)."""
    if wait and llm.usage.late:
        log.info("waiting for the usage of %d timed-out call(s) the server may still answer", len(llm.usage.late))
    llm.usage.settle(wait=wait)


FAILED_STATUSES = frozenset({RunStatus.STOPPED, RunStatus.FAILED})  # the pass ended before its sessions were done


def not_taken(run: DreamRun | None, held: leases.Holder | None, limit: int, now: datetime) -> str:
    """Why a due session was not dreamed by `run` (None: no pass ran), in words: another worker
    holds it (named, with its heartbeat), the pass stopped or failed before it (its reason), or it
    is past what a pass takes."""
    if held is not None and leases.as_aware(held.expires_at) >= now:
        return f"is due, leased by {leases.holder_text(held, now)}"
    if run is not None and run.status in FAILED_STATUSES:
        return f"is due, not reached: the pass {run.status} before it ({run.error or 'no reason recorded'})"
    return f"is due, not reached by this pass (a pass takes at most {limit}: DREAMER_MAX_SESSIONS_PER_PASS)"


def pass_failure(run: DreamRun, session_errors: Sequence[str]) -> str | None:
    """Why a pass did not do its work, in one line (the run's own reason, such as the breaker's,
    then the failed sessions' errors not already in it); None when it did. `session_errors` are
    the last errors on the cursors of the sessions it was given."""
    if run.status not in FAILED_STATUSES and not run.failed_sessions:
        return None
    reasons = [run.error] if run.error else []
    for error in dict.fromkeys(" ".join(e.split()) for e in session_errors if e):
        if not any(error in reason for reason in reasons):
            reasons.append(error)
    return (
        f"the pass {run.status}, {run.failed_sessions} session(s) failed: {'; '.join(reasons) or 'no reason recorded'}"
    )


def session_errors(rt: Runtime, session_ids: Sequence[int]) -> list[str]:
    """The last errors on the cursors of these sessions that failed or are quarantined, by session."""
    with session_scope(rt.engine) as s:
        q = (
            select(Cursor.last_error)
            .where(col(Cursor.session_id).in_(session_ids), col(Cursor.status).in_(("failed", "quarantined")))
            .order_by(col(Cursor.session_id))
        )
        return [e for e in s.exec(q).all() if e]
