"""The pass's `dream_runs` row: started with its run lease, its counts tallied, saved at the
end with the model's usage, the run lease released."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TypedDict

from sqlmodel import col, select

from dreamer.core.models import Cursor, DreamRun, Lease, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.engine.consolidation.guard import PassGuard
from dreamer.engine.failures import TimedOut
from dreamer.engine.runtime import Runtime
from dreamer.llm.guard import GuardedLLM
from dreamer.store import leases
from dreamer.store.db import session_scope


class Rejection(TypedDict):
    """A candidate the pass did not store, as the run row lists it."""

    session_id: int | None
    text: str
    reason: str


DROPPED = "dropped from the model's reply"


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
    guard: PassGuard | None = None  # made from the settings when the pass first applies a session


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
        expires = utcnow() + timedelta(seconds=rt.settings.lease_seconds)
        s.add(Lease(name=leases.run_lease(run_id(run)), owner=run_owner(run), expires_at=expires))
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
        run.llm_calls = llm.calls
        run.prompt_tokens, run.completion_tokens = llm.usage.prompt_tokens, llm.usage.completion_tokens
    run.finished_at = utcnow()
    with session_scope(rt.engine) as s:
        s.add(run)
    leases.release(rt.engine, leases.run_lease(run_id(run)), run_owner(run))
    return run


FAILED_STATUSES = frozenset({RunStatus.STOPPED, RunStatus.FAILED})  # the pass ended before its sessions were done


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
