"""The supersede/forget guard of a pass: each user's current memories counted when the pass
first applies a session of theirs, the removals it applied since, and whether the next batch
of removals goes through or is held for a person (the decision is `dreamer.core.guard`'s)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.guard import trips
from dreamer.core.models import CURRENT_STATUSES, Memory


@dataclass
class PassGuard:
    """What the guard knows of one pass, per user."""

    share: float
    floor: int
    current: dict[str, int] = field(default_factory=dict)  # current memories when the pass first touched the user
    applied: dict[str, int] = field(default_factory=dict)  # supersedes and forgets applied since
    tripped: set[str] = field(default_factory=set)  # users whose removals this pass holds from then on

    def holds(self, s: DBSession, user_id: str, removals: int) -> bool:
        """Whether `removals` more supersedes or forgets of `user_id`'s memories are held for a
        person (True) or applied (False, and counted). Ask it before the batch's adds are
        written: the first ask of a user counts their current memories."""
        if user_id not in self.current:
            self.current[user_id] = count_current(s, user_id)
        if removals == 0:
            return False
        done = self.applied.get(user_id, 0)
        if user_id in self.tripped or trips(self.current[user_id], done, removals, share=self.share, floor=self.floor):
            self.tripped.add(user_id)
            return True
        self.applied[user_id] = done + removals
        return False


def count_current(s: DBSession, user_id: str) -> int:
    """How many current memories `user_id` has."""
    q = select(func.count()).select_from(Memory).where(col(Memory.user_id) == user_id)
    return s.exec(q.where(col(Memory.status).in_(CURRENT_STATUSES))).one()
