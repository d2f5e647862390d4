"""A dream run as a changeset you can read, undo, and (for what the guard held) accept.

`run_changes` lists what a run did; `revert_run` undoes it as new `revert` events (nothing
deleted), stopping where a later change is in the way unless forced; `accept_run` applies the
supersessions the guard held, as events of the run. Each writes SQL only, in one transaction,
with the memories it changed waiting in the outbox: the caller drains it (`outbox.drain`), so
the index and the Markdown follow. What to undo is `dreamer.core.changeset`'s (pure)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func
from sqlalchemy.engine import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.changeset import Change, Conflict, pending_holds, plan_revert, undo_fields, undone
from dreamer.core.errors import NotFound, RunInProgress
from dreamer.core.models import CURRENT_STATUSES, DreamRun, Memory, MemoryEvent, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.store import cabinet, gate
from dreamer.store.db import session_scope


@dataclass(frozen=True)
class RunChange:
    """One change of a run, with the memory it changed, and whether it was undone since."""

    change: Change
    user_id: str
    text: str
    status: str  # the memory's status now
    undone: bool


@dataclass
class Reverted:
    """What a revert did (or, dry or stopped, would do)."""

    run_id: int
    undone: list[RunChange] = field(default_factory=list)
    already: int = 0  # changes of the run undone before
    conflicts: list[Conflict] = field(default_factory=list)
    unsupported: list[Change] = field(default_factory=list)
    applied: bool = False

    @property
    def users(self) -> list[str]:
        return sorted({c.user_id for c in self.undone})


@dataclass
class Accepted:
    run_id: int
    applied: list[RunChange] = field(default_factory=list)
    skipped: list[tuple[RunChange, str]] = field(default_factory=list)  # and why

    @property
    def users(self) -> list[str]:
        return sorted({c.user_id for c in self.applied})


def run_changes(engine: Engine, run_id: int, *, user_id: str | None = None) -> list[RunChange]:
    """The run's changes (revert events apart), oldest first, each with its memory's owner and text."""
    with session_scope(engine) as s:
        require_run(s, run_id)
        memories = _memories(s, _touched(s, run_id, user_id))
        history = _history(s, list(memories))
    done = undone(history)
    return [_described(c, memories[c.memory_id], c.id in done) for c in history if c.run_id == run_id]


def revert_run(
    engine: Engine,
    run_id: int,
    *,
    user_id: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    actor: str | None = None,
) -> Reverted:
    """Undo run `run_id` (of `user_id`'s memories only, if given): restore what it superseded,
    forgot or held, take out the evidence it merged in, set what it added to `reverted`. Stops
    (writes nothing) where a later change touched the same memories, unless `force`. `actor`:
    who asked (a person's token name or role), kept in each `revert` event."""
    now = utcnow()
    with session_scope(engine) as s:
        require_run(s, run_id, finished=True)
        memories = _memories(s, _touched(s, run_id, user_id), lock=not dry_run)
        plan = plan_revert(run_id, _history(s, list(memories)))
        result = Reverted(run_id, already=plan.already, conflicts=plan.conflicts, unsupported=plan.unsupported)
        result.undone = [_described(c, memories[c.memory_id], False) for c in plan.undo]
        if dry_run or (plan.blocked and not force) or not plan.undo:
            return result
        for c in plan.undo:
            _undo(s, memories[c.memory_id], c, now=now, actor=actor)
        result.applied = True
    return result


def accept_run(engine: Engine, run_id: int, *, user_id: str | None = None, actor: str | None = None) -> Accepted:
    """Apply the supersessions the guard held in run `run_id`, as events of that run. A held
    memory changed since (no longer `review_required`), or whose successor is no longer
    current, is left as it is and said. `actor`: who accepted, kept in each event."""
    now = utcnow()
    with session_scope(engine) as s:
        require_run(s, run_id, finished=True)
        memories = _memories(s, _touched(s, run_id, user_id, events=("hold",)), lock=True)
        result = Accepted(run_id)
        for c in pending_holds(run_id, _history(s, list(memories))):
            m, item = memories[c.memory_id], _described(c, memories[c.memory_id], False)
            why = _why_not(s, m, c)
            if why:
                result.skipped.append((item, why))
                continue
            reason = f"accepted: {c.reason or 'held by the guard'}"
            if c.data.get("action") == "forget":
                cabinet.forget(s, m.id, reason=reason, run_id=run_id, accepted=c.id, actor=actor)
            else:
                data = {"accepted": c.id, **({"actor": actor} if actor else {})}
                cabinet.supersede(s, m, str(c.data["by"]), run_id=run_id, reason=reason, now=now, data=data)
            result.applied.append(item)
    return result


def held_runs(engine: Engine) -> dict[int, int]:
    """Run id -> how many of its held changes wait for a person (the memory still `review_required`)."""
    q = (
        select(MemoryEvent.run_id, func.count(col(MemoryEvent.id)))
        .join(Memory, col(Memory.id) == col(MemoryEvent.memory_id))
        .where(col(MemoryEvent.event) == "hold", col(Memory.status) == "review_required")
        .group_by(col(MemoryEvent.run_id))
        .order_by(col(MemoryEvent.run_id))
    )
    with session_scope(engine) as s:
        return {int(r): int(n) for r, n in s.exec(q).all() if r is not None}


def require_run(s: DBSession, run_id: int, *, finished: bool = False) -> DreamRun:
    """The run; with `finished`, refused while it is still running (it may change more)."""
    run = s.get(DreamRun, run_id)
    if run is None:
        raise NotFound(f"no run {run_id}")
    if finished and run.status == RunStatus.RUNNING:
        raise RunInProgress(f"run {run_id} is still running: wait until it has finished")
    return run


def _why_not(s: DBSession, m: Memory, hold: Change) -> str | None:
    if m.status != "review_required":
        return f"changed since: now {m.status}"
    by = hold.data.get("by")
    if hold.data.get("action", "supersede") == "supersede":
        successor = s.get(Memory, str(by)) if by else None
        if successor is None or successor.status not in CURRENT_STATUSES:
            return f"its successor {by} is no longer current"
    return None


def _touched(s: DBSession, run_id: int, user_id: str | None, events: tuple[str, ...] | None = None) -> list[str]:
    q = select(MemoryEvent.memory_id).where(col(MemoryEvent.run_id) == run_id)
    if events is not None:
        q = q.where(col(MemoryEvent.event).in_(events))
    if user_id is not None:
        q = q.join(Memory, col(Memory.id) == col(MemoryEvent.memory_id)).where(col(Memory.user_id) == user_id)
    return sorted(set(s.exec(q).all()))


def _memories(s: DBSession, ids: list[str], *, lock: bool = False) -> dict[str, Memory]:
    """The memories, row-locked in id order when `lock` (two writers cannot deadlock)."""
    if not ids:
        return {}
    q = select(Memory).where(col(Memory.id).in_(ids)).order_by(col(Memory.id))
    return {m.id: m for m in s.exec(q.with_for_update() if lock else q).all()}


def _history(s: DBSession, ids: list[str]) -> list[Change]:
    """Every event (any run's) of these memories, oldest first."""
    if not ids:
        return []
    q = select(MemoryEvent).where(col(MemoryEvent.memory_id).in_(ids)).order_by(col(MemoryEvent.id))
    return [Change(e.id or 0, e.memory_id, e.event, e.run_id, dict(e.data or {}), e.reason) for e in s.exec(q).all()]


def _described(c: Change, m: Memory, undone: bool) -> RunChange:
    return RunChange(c, m.user_id, m.text, m.status, undone)


def _undo(s: DBSession, m: Memory, c: Change, *, now: datetime, actor: str | None = None) -> None:
    """Undo one change of `m`, and say so in a `revert` event; the memory waits in the outbox."""
    row: dict[str, Any] = {"status": m.status, "evidence": list(m.evidence), "untrusted": m.untrusted}
    fields = undo_fields(c, row, now=now)
    before = m.status
    gate.set_columns(m, {"updated_at": now, **fields})
    m.indexed_at = None
    s.add(m)
    data = {"of": c.id, "undoes": c.event, "run": c.run_id, "status": [before, m.status]}
    if actor:
        data["actor"] = actor
    cabinet.record_event(s, m.id, "revert", reason=f"revert of run {c.run_id}", data=data)
