"""Whose sessions wait because their owner is busy: the busy keys read once, and the due
sessions split into those a pass takes now and those it leaves due.

A busy signal out of reach holds back everyone (nobody can tell who is idle), as it always did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from dreamer.core.errors import Retryable
from dreamer.core.models import Session
from dreamer.core.scope import Owned
from dreamer.engine.due import DueRules, due_sessions
from dreamer.engine.runtime import Runtime
from dreamer.store.busy import BusySignal, owner_busy
from dreamer.store.db import session_scope


@dataclass(frozen=True)
class BusyNow:
    """The busy keys at one time, or (`everyone`) why nobody counts as idle."""

    keys: dict[str, str] = field(default_factory=dict)
    everyone: str | None = None

    def reason(self, owner: Owned) -> str | None:
        """Why the sessions of `owner` wait now, or None."""
        return self.everyone or owner_busy(self.keys, owner.user_id, owner.agent_id)


def busy_now(signal: BusySignal, at: datetime) -> BusyNow:
    """The busy keys at `at`; a signal out of reach (`Retryable`) holds back everyone."""
    try:
        return BusyNow(signal.busy_keys(at))
    except Retryable as exc:
        return BusyNow(everyone=str(exc))


def due_by_busy(
    rt: Runtime, at: datetime, *, session_ids: list[int] | None = None, user_id: str | None = None
) -> tuple[list[Session], str | None]:
    """The due sessions whose owners are idle at `at`, and why the others wait (None when
    none does)."""
    busy = busy_now(rt.busy, at)
    if busy.everyone:
        return [], busy.everyone
    with session_scope(rt.engine) as s:
        due = [
            sess
            for sess, _ in due_sessions(
                s, DueRules.from_settings(rt.settings), at, session_ids=session_ids, user_id=user_id
            )
        ]
    idle = [sess for sess in due if busy.reason(sess) is None]
    waiting = next((r for sess in due if (r := busy.reason(sess)) is not None), None)
    return idle, waiting


def all_due_busy(
    rt: Runtime, at: datetime, *, session_ids: list[int] | None = None, user_id: str | None = None
) -> str | None:
    """Why a pass at `at` would find nothing to do but sessions whose owners are busy (then it
    is skipped, and backs off), or None: some due session's owner is idle, or none is due."""
    busy = busy_now(rt.busy, at)
    if busy.everyone or not busy.keys:  # nobody can tell who is idle, or everyone is
        return busy.everyone
    idle, waiting = due_by_busy(rt, at, session_ids=session_ids, user_id=user_id)
    return None if idle else waiting


def session_busy(rt: Runtime, session_id: int, at: datetime) -> str | None:
    """Why the session's owner is busy at `at`, or None (also for a session that is gone)."""
    busy = busy_now(rt.busy, at)
    if busy.everyone:
        return busy.everyone
    with session_scope(rt.engine) as s:
        sess = s.get(Session, session_id)
    return None if sess is None else busy.reason(sess)
