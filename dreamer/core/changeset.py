"""A dream run as a changeset (pure): from the history events of the memories a run touched,
the events that undo it (newest first), the later changes in the way, and the new values of
a memory's fields once one event is undone.

Every change a pass makes is a `memory_events` row carrying its run: `add`, `merge`,
`supersede`, `forget`, and `hold` (a supersede or forget the guard held for a person). A
`revert` event undoes one of them; its `data["of"]` names the event it undid, so undoing twice
changes nothing. The fields a change overwrites are kept in its `data["before"]` (`snapshot`);
rows written before that are undone from what they do record (the status before, the evidence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from dreamer.core.consolidate import Evidence, evidence_key, promoted_status

UNDOABLE = ("add", "merge", "supersede", "forget", "hold")
RESTORED = ("status", "importance", "last_seen", "updated_at", "valid_to", "valid_until", "superseded_by")
"""The fields of a memory a change overwrites and its undo puts back (the evidence apart)."""
REVERTED = "reverted"  # the status of a memory whose adding was undone: not current, and not refused later


@dataclass(frozen=True)
class Change:
    """One history event, as the changeset reads it."""

    id: int
    memory_id: str
    event: str
    run_id: int | None
    data: Mapping[str, Any] = field(default_factory=dict)
    reason: str | None = None


@dataclass(frozen=True)
class Conflict:
    """A change made after the run, by another run (None: by a person or an agent), to a memory the run changed."""

    memory_id: str
    run_id: int | None
    event: str
    event_id: int


@dataclass(frozen=True)
class RevertPlan:
    undo: list[Change]  # the run's events still to undo, newest first
    conflicts: list[Conflict]
    unsupported: list[Change]  # events of the run no undo is known for
    already: int  # events of the run undone before

    @property
    def blocked(self) -> bool:
        return bool(self.conflicts or self.unsupported)


def snapshot(values: Mapping[str, Any]) -> dict[str, Any]:
    """The `RESTORED` fields of a memory as an event's JSON keeps them (times in ISO 8601)."""
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in values.items() if k in RESTORED}


def undone(history: Sequence[Change]) -> set[int]:
    """The ids of the events a `revert` event has undone."""
    return {int(c.data["of"]) for c in history if c.event == "revert" and c.data.get("of") is not None}


def plan_revert(run_id: int, history: Sequence[Change]) -> RevertPlan:
    """What undoing run `run_id` takes, from every event (any run's) of the memories it touched."""
    history = sorted(history, key=lambda c: c.id)
    done = undone(history)
    own = [c for c in history if c.run_id == run_id and c.event != "revert"]
    pending = [c for c in own if c.id not in done]
    first: dict[str, int] = {}
    for c in pending:
        first.setdefault(c.memory_id, c.id)
    conflicts = [
        Conflict(c.memory_id, c.run_id, c.event, c.id)
        for c in history
        if c.memory_id in first
        and c.id > first[c.memory_id]
        and c.run_id != run_id
        and c.event != "revert"
        and c.id not in done  # a later change undone since is not in the way
    ]
    return RevertPlan(
        undo=[c for c in reversed(pending) if c.event in UNDOABLE],
        conflicts=conflicts,
        unsupported=[c for c in pending if c.event not in UNDOABLE],
        already=len(own) - len(pending),
    )


def pending_holds(run_id: int, history: Sequence[Change]) -> list[Change]:
    """The run's `hold` events a person has neither accepted nor dropped (by a revert)."""
    settled = undone(history) | {int(c.data["accepted"]) for c in history if c.data.get("accepted") is not None}
    return [
        c
        for c in sorted(history, key=lambda c: c.id)
        if c.run_id == run_id and c.event == "hold" and c.id not in settled
    ]


def undo_fields(change: Change, row: Mapping[str, Any], *, now: datetime) -> dict[str, Any]:
    """The new values of the fields of memory `row` (its current values) once `change` is undone."""
    data = change.data
    before = {k: _time(k, v) for k, v in (data.get("before") or {}).items() if k in RESTORED}
    if change.event == "add":
        return {"status": REVERTED, "valid_to": now}
    if change.event == "merge":
        added = {evidence_key(e) for e in data.get("added", data.get("evidence", []))}
        evidence: list[Evidence] = [e for e in row["evidence"] if evidence_key(e) not in added]
        return {"status": _status_before(data, row), **before, "evidence": evidence}
    if change.event == "supersede":
        status = _status_before(data, row, promoted_status("candidate", row["evidence"], untrusted=row["untrusted"]))
        return {"valid_to": None, "superseded_by": None, **before, "status": status}
    if change.event == "forget":
        return {"valid_to": None, **before, "status": _status_before(data, row)}
    if change.event == "hold":
        return {**before, "status": _status_before(data, row)}
    raise ValueError(f"no undo for a {change.event} event")


def _status_before(data: Mapping[str, Any], row: Mapping[str, Any], fallback: str | None = None) -> str:
    before = (data.get("before") or {}).get("status")
    if before is None and isinstance(data.get("status"), list) and data["status"]:
        before = data["status"][0]
    return str(before or fallback or row["status"])


def _time(key: str, value: Any) -> Any:
    if key in ("last_seen", "updated_at", "valid_to", "valid_until") and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value
