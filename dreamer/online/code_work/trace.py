"""The code-work part of a trace: experience entries and project state fields that hold the
fact (or are named by their id), with their status, why they have it, and their history, so
a change that sent them back to review shows where the fact went."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TypedDict

from sqlalchemy.engine import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.consolidate import normalise
from dreamer.core.models import ExperienceEntry, ExperienceEvent, ProjectState
from dreamer.store.db import session_scope


class CodeEvent(TypedDict):
    """One event of an entry's or a state's history."""

    event: str
    status_before: str | None
    status_after: str
    reason: str | None
    at: str


@dataclass
class CodeWork:
    """An experience entry (`entry`) or a project state field (`state`) the fact leads to."""

    subject: str
    id: str
    project: str
    branch: str
    text: str
    status: str
    reason: str | None
    history: list[CodeEvent] = field(default_factory=list)


def matches(fact: str, text: str) -> bool:
    """The normalised fact appears in the normalised text (case, punctuation and spacing ignored)."""
    needle = normalise(fact)
    return bool(needle) and f" {needle} " in f" {normalise(text)} "


def holds(fact: str, *texts: str) -> bool:
    """The fact `matches` one of the texts."""
    return any(matches(fact, t) for t in texts)


def _entry_texts(e: ExperienceEntry) -> list[str]:
    return [e.text, e.unit or "", *map(str, e.conditions or []), *map(str, e.counterexamples or [])]


def _state_text(st: ProjectState) -> str:
    value = st.value if isinstance(st.value, str) else json.dumps(st.value)
    return f"{st.unit}.{st.field} = {value}"


def find_code_work(engine: Engine, fact: str, user_id: str, *, project: str | None = None) -> list[CodeWork]:
    """The user's entries and state fields (of `project` when given), of any status, that hold
    `fact` or whose id it is."""
    wanted = fact.strip()
    entry_q = select(ExperienceEntry).where(ExperienceEntry.user_id == user_id)
    state_q = select(ProjectState).where(ProjectState.user_id == user_id)
    if project is not None:
        entry_q, state_q = (
            entry_q.where(ExperienceEntry.project == project),
            state_q.where(ProjectState.project == project),
        )
    with session_scope(engine) as s:
        entries, states = s.exec(entry_q).all(), s.exec(state_q).all()
        found = [
            CodeWork("entry", e.id, e.project, e.branch, e.text, e.status, e.reason)
            for e in sorted(entries, key=lambda e: (e.created_at, e.id))
            if e.id == wanted or holds(fact, *_entry_texts(e))
        ] + [
            CodeWork("state", st.id, st.project, st.branch, _state_text(st), st.status, st.reason)
            for st in sorted(states, key=lambda st: (st.unit, st.field, st.id))
            if st.id == wanted or holds(fact, _state_text(st), st.unit, st.field)
        ]
        events = _history(s, [w.id for w in found])
    for w in found:
        w.history = events.get(w.id, [])
    return found


def _history(s: DBSession, ids: list[str]) -> dict[str, list[CodeEvent]]:
    if not ids:
        return {}
    out: dict[str, list[CodeEvent]] = {}
    q = select(ExperienceEvent).where(col(ExperienceEvent.subject_id).in_(ids)).order_by(col(ExperienceEvent.id))
    for e in s.exec(q).all():
        out.setdefault(e.subject_id, []).append(
            {
                "event": e.event,
                "status_before": e.status_before,
                "status_after": e.status_after,
                "reason": e.reason,
                "at": e.created_at.isoformat(),
            }
        )
    return out
