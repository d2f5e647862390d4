"""The `teams` table: creating, reading, listing and ending a user's teams."""

from __future__ import annotations

from sqlalchemy import Engine, delete
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from dreamer.core.errors import AlreadyExists, NotFound
from dreamer.core.models import Memory, MemoryEvent, Team
from dreamer.store.db import session_scope


def create_team(engine: Engine, user_id: str, name: str, leader: str, *, temporary: bool = False) -> Team:
    """A new team of `user_id`; `AlreadyExists` when the user has one of that name."""
    team = Team(user_id=user_id, name=name, leader=leader, temporary=temporary)
    try:
        with session_scope(engine) as s:
            s.add(team)
            s.flush()
    except IntegrityError as exc:
        raise AlreadyExists(f"user {user_id} has a team {name!r} already") from exc
    return team


def get_team(engine: Engine, user_id: str, name: str) -> Team:
    """The team `name` of `user_id`; `NotFound` when there is none."""
    with session_scope(engine) as s:
        team = s.exec(select(Team).where(Team.user_id == user_id, Team.name == name)).first()
    if team is None:
        raise NotFound(f"user {user_id} has no team {name!r}")
    return team


def list_teams(engine: Engine, user_id: str | None = None) -> list[Team]:
    """Every team (of `user_id` when given), by user and name."""
    q = select(Team).order_by(col(Team.user_id), col(Team.name))
    if user_id is not None:
        q = q.where(Team.user_id == user_id)
    with session_scope(engine) as s:
        return list(s.exec(q).all())


def count_round(engine: Engine, team: Team) -> int:
    """Count one more closed round of `team`; the new count."""
    with session_scope(engine) as s:
        row = s.get_one(Team, team.id, with_for_update=True)
        row.rounds += 1
        s.add(row)
        return row.rounds


def end_team(engine: Engine, team: Team) -> list[str]:
    """End a temporary team's task: its row goes, with any memory owned by exactly its scope
    (none, as its rounds write nothing) and their history; the ids of those memories, for the
    index to drop. A persistent team is not ended this way (its memory is kept)."""
    with session_scope(engine) as s:
        ids = list(
            s.exec(
                select(Memory.id).where(
                    Memory.user_id == team.user_id,
                    Memory.team == team.name,
                    col(Memory.agent_id).is_(None),
                    col(Memory.project).is_(None),
                )
            ).all()
        )
        if ids:
            s.exec(delete(MemoryEvent).where(col(MemoryEvent.memory_id).in_(ids)))
            s.exec(delete(Memory).where(col(Memory.id).in_(ids)))
        s.exec(delete(Team).where(col(Team.id) == team.id))
    return ids
