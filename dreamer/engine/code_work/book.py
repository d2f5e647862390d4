"""Project states and experience entries, written through their lifecycle
(`dreamer.core.code_work.experience`): each call is one transaction, and every change an event in history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from sqlalchemy.engine import Engine

from dreamer.core.code_work import experience as life
from dreamer.core.errors import NotFound
from dreamer.core.models import ExperienceEntry, ProjectState, utcnow
from dreamer.store import experience as rows
from dreamer.store import gate
from dreamer.store.db import session_scope
from dreamer.store.experience import Where


@dataclass(frozen=True)
class StateInput:
    """A state field as a caller gives it."""

    unit: str
    field: str
    value: Any = None
    status: str = "in_progress"
    evidence: Mapping[str, Any] = dc_field(default_factory=dict)
    depends_on: Sequence[str] = ()
    by: str | None = None  # a person who vouches for it


@dataclass(frozen=True)
class EntryInput:
    """An experience entry as a caller gives it (a finding of a task)."""

    text: str
    unit: str | None = None
    task: str | None = None
    basis: str = "inferred"
    origin: str = "agent"
    conditions: Sequence[str] = ()
    counterexamples: Sequence[str] = ()
    unverified: Sequence[str] = ()
    versions: Mapping[str, str] = dc_field(default_factory=dict)
    depends_on: Sequence[str] = ()
    keywords: Sequence[str] = ()
    evidence: Sequence[Any] = ()


def lifecycle(e: ExperienceEntry) -> life.Lifecycle:
    return life.Lifecycle(
        status=e.status,
        verified_units=tuple(e.verified_units),
        ever_verified=e.ever_verified,
        untrusted=e.untrusted,
        conditions=tuple(e.conditions),
        counterexamples=tuple(e.counterexamples),
    )


def apply_outcome(e: ExperienceEntry, out: life.Outcome) -> None:
    a = out.after
    e.status, e.verified_units, e.ever_verified = a.status, list(a.verified_units), a.ever_verified
    gate.set_entry(e, conditions=list(a.conditions), counterexamples=list(a.counterexamples))
    e.reason = out.reason


def _text(value: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise life.InvalidExperience(f"{what} must be non-empty text")
    return value.strip()


def new_entry(where: Where, given: EntryInput) -> ExperienceEntry:
    """The row of a new entry (a candidate), its basis and origin kept apart."""
    basis, note = life.source_of(given.basis, given.origin)
    text = _text(given.text, "an entry's text")
    return gate.new_entry(
        user_id=where.user_id,
        project=where.project,
        branch=where.branch,
        unit=given.unit,
        text=text,
        basis=basis,
        origin=given.origin,
        conditions=[str(c) for c in given.conditions],
        counterexamples=[str(c) for c in given.counterexamples],
        unverified=[str(u) for u in given.unverified],
        source_tasks=[given.task] if given.task else [],
        versions={str(k): str(v) for k, v in given.versions.items()},
        depends_on=life.check_targets([str(t) for t in given.depends_on]),
        keywords=[str(k) for k in given.keywords],
        evidence=list(given.evidence),
        note=note,
        reason="added from one task: a candidate",
    )


def _flagged(reason: str | None, steering: str | None) -> str | None:
    """A state's reason, saying so when its value or evidence steers (kept as data, never an order)."""
    return "; ".join(filter(None, [reason, f"untrusted: {steering}" if steering else None])) or None


class CodeBook:
    """States and entries over one SQL engine; `depth` bounds how far a change propagates."""

    def __init__(self, engine: Engine, *, depth: int = 8) -> None:
        self.engine = engine
        self.depth = depth

    def set_state(self, where: Where, given: StateInput) -> ProjectState:
        """Create or update one state field; a verified claim without a passed check or a person
        is stored `in_progress`."""
        unit, name = _text(given.unit, "a state's unit"), _text(given.field, "a state's field")
        evidence = dict(given.evidence)
        status, reason = life.state_status(given.status, evidence, given.by)
        depends = life.check_targets([str(t) for t in given.depends_on])
        with session_scope(self.engine) as s:
            row = rows.state_at(s, where, unit, name)
            before = row.status if row else None
            if row is None:
                row = gate.new_state(
                    user_id=where.user_id, project=where.project, branch=where.branch, unit=unit, field=name
                )
            steering = gate.set_state(row, value=given.value, evidence=evidence)
            row.status, row.depends_on, row.reason = status, depends, _flagged(reason, steering)
            rows.record(s, row, "set" if before else "add", before, reason, {"value": row.value})
        return row

    def add_entry(self, where: Where, given: EntryInput) -> ExperienceEntry:
        e = new_entry(where, given)
        with session_scope(self.engine) as s:
            rows.record(s, e, "add", None, e.reason, {"task": given.task, "basis": e.basis, "origin": e.origin})
        return e

    def verify(self, user_id: str, entry_id: str, unit: str, result: str, task: str | None = None) -> ExperienceEntry:
        """A check of the entry in `unit` (`passed`, `failed`, ...)."""
        unit = _text(unit, "the verifying unit")
        with session_scope(self.engine) as s:
            e = rows.entry(s, user_id, entry_id)
            before = e.status
            apply_outcome(e, life.after_verify(lifecycle(e), unit, result))
            if task and task not in e.source_tasks:
                e.source_tasks = [*e.source_tasks, task]
            rows.record(s, e, "verify", before, e.reason, {"unit": unit, "result": result, "task": task})
        return e

    def counterexample(
        self, user_id: str, entry_id: str, text: str, unit: str | None = None, task: str | None = None
    ) -> ExperienceEntry:
        with session_scope(self.engine) as s:
            e = rows.entry(s, user_id, entry_id)
            before = e.status
            apply_outcome(e, life.after_counterexample(lifecycle(e), text))
            rows.record(s, e, "counterexample", before, e.reason, {"unit": unit, "task": task})
        return e

    def confirm(self, user_id: str, subject_id: str, by: str) -> ExperienceEntry | ProjectState:
        """A person vouches for an entry or a state field."""
        with session_scope(self.engine) as s:
            try:
                e = rows.entry(s, user_id, subject_id)
            except NotFound:
                return self._confirm_state(s, user_id, subject_id, by)
            before = e.status
            apply_outcome(e, life.after_confirm(lifecycle(e), by))
            e.confirmed_by, e.last_confirmed = by, utcnow()
            rows.record(s, e, "confirm", before, e.reason, {"by": by})
        return e

    def check_state(self, user_id: str, state_id: str, result: str, command: str | None = None) -> ProjectState:
        """A check run again on a state field: passed makes it verified, anything else in progress."""
        with session_scope(self.engine) as s:
            row = rows.state(s, user_id, state_id)
            before = row.status
            steering = gate.set_state(
                row, evidence={**row.evidence, "result": result, **({"command": command} if command else {})}
            )
            row.status, row.reason = life.state_status("verified", row.evidence, None)
            row.reason = _flagged(row.reason, steering)
            rows.record(s, row, "check", before, row.reason, {k: row.evidence.get(k) for k in ("result", "command")})
        return row

    def _confirm_state(self, s: Any, user_id: str, state_id: str, by: str) -> ProjectState:
        row = rows.state(s, user_id, state_id)
        if not by.strip():
            raise life.InvalidExperience("a confirmation names the person who confirms")
        before = row.status
        row.status, row.reason = "verified", f"confirmed by {by}"
        gate.set_state(row, evidence={**row.evidence, "confirmed_by": by})
        rows.record(s, row, "confirm", before, row.reason, {"by": by})
        return row
