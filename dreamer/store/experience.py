"""SQL rows of code work: project states, experience entries and their history, read and written
within one user's project and branch (`Where`). Every change is an event with its reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import NotFound
from dreamer.core.models import ExperienceEntry, ExperienceEvent, ProjectState, utcnow


@dataclass(frozen=True)
class Where:
    """One user's project and branch: what every read and write of code work is bound to."""

    user_id: str
    project: str
    branch: str = "main"


def states(s: DBSession, where: Where, unit: str | None = None) -> Sequence[ProjectState]:
    q = select(ProjectState).where(
        ProjectState.user_id == where.user_id,
        ProjectState.project == where.project,
        ProjectState.branch == where.branch,
    )
    if unit is not None:
        q = q.where(ProjectState.unit == unit)
    return s.exec(q.order_by(col(ProjectState.unit), col(ProjectState.field))).all()


def entries(s: DBSession, where: Where, statuses: Sequence[str] | None = None) -> Sequence[ExperienceEntry]:
    q = select(ExperienceEntry).where(
        ExperienceEntry.user_id == where.user_id,
        ExperienceEntry.project == where.project,
        ExperienceEntry.branch == where.branch,
    )
    if statuses is not None:
        q = q.where(col(ExperienceEntry.status).in_(list(statuses)))
    return s.exec(q.order_by(col(ExperienceEntry.created_at), col(ExperienceEntry.id))).all()


def state_at(s: DBSession, where: Where, unit: str, field: str) -> ProjectState | None:
    return s.exec(
        select(ProjectState).where(
            ProjectState.user_id == where.user_id,
            ProjectState.project == where.project,
            ProjectState.branch == where.branch,
            ProjectState.unit == unit,
            ProjectState.field == field,
        )
    ).first()


def _owned(row: ProjectState | ExperienceEntry | None, user_id: str) -> bool:
    return row is not None and row.user_id == user_id


def entry(s: DBSession, user_id: str, entry_id: str) -> ExperienceEntry:
    """The user's entry with this id (another user's is not found)."""
    row = s.get(ExperienceEntry, entry_id)
    if row is None or not _owned(row, user_id):
        raise NotFound(f"no experience entry {entry_id}")
    return row


def state(s: DBSession, user_id: str, state_id: str) -> ProjectState:
    """The user's state field with this id."""
    row = s.get(ProjectState, state_id)
    if row is None or not _owned(row, user_id):
        raise NotFound(f"no project state {state_id}")
    return row


def record(
    s: DBSession,
    row: ProjectState | ExperienceEntry,
    event: str,
    before: str | None,
    reason: str | None,
    data: dict[str, Any] | None = None,
) -> ExperienceEvent:
    """Write `row` and the event of its change (the row's status after it)."""
    row.updated_at = utcnow()
    s.add(row)
    ev = ExperienceEvent(
        user_id=row.user_id,
        project=row.project,
        branch=row.branch,
        subject="state" if isinstance(row, ProjectState) else "entry",
        subject_id=row.id,
        event=event,
        status_before=before,
        status_after=row.status,
        reason=reason,
        data=data,
    )
    s.add(ev)
    return ev


def history(s: DBSession, user_id: str, subject_id: str) -> Sequence[ExperienceEvent]:
    return s.exec(
        select(ExperienceEvent)
        .where(ExperienceEvent.user_id == user_id, ExperienceEvent.subject_id == subject_id)
        .order_by(col(ExperienceEvent.id))
    ).all()


def projects(s: DBSession, user_id: str) -> list[tuple[str, str]]:
    """The (project, branch) pairs the user has states or entries in."""
    pairs = set(
        s.exec(select(ProjectState.project, ProjectState.branch).where(ProjectState.user_id == user_id)).all()
    ) | set(
        s.exec(select(ExperienceEntry.project, ExperienceEntry.branch).where(ExperienceEntry.user_id == user_id)).all()
    )
    return sorted((str(p), str(b)) for p, b in pairs)
