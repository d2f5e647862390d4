"""Which sessions a pass takes: new messages past the cursor, not quarantined, quiet long
enough, enough rounds, not too old; oldest first, at most a pass's worth; and which of them
share extraction calls (consecutive sessions of one owner)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlmodel import Session as DBSession
from sqlmodel import select

from dreamer.core.models import Cursor, Session
from dreamer.core.settings import Settings


@dataclass(frozen=True)
class DueRules:
    min_rounds: int
    quiet: timedelta
    max_age: timedelta
    limit: int

    @classmethod
    def from_settings(cls, settings: Settings) -> DueRules:
        return cls(
            min_rounds=settings.min_rounds,
            quiet=timedelta(seconds=settings.quiet_period_seconds),
            max_age=timedelta(days=settings.max_age_days),
            limit=settings.max_sessions_per_pass,
        )


def is_due(
    *,
    last_seq: int,
    processed_seq: int,
    status: str,
    rounds: int,
    updated_at: datetime,
    now: datetime,
    rules: DueRules,
    explicit: bool = False,
) -> bool:
    """The policy, as a pure function; `due_sessions` runs the same test in SQL.

    An explicitly named session skips the quiet, rounds and age rules, never quarantine."""
    if last_seq <= processed_seq or status == "quarantined":
        return False
    if explicit:
        return True
    return rounds >= rules.min_rounds and now - rules.max_age <= updated_at <= now - rules.quiet


def due_sessions(
    s: DBSession,
    rules: DueRules,
    now: datetime,
    *,
    session_ids: list[int] | None = None,
    user_id: str | None = None,
) -> list[tuple[Session, Cursor]]:
    q = (
        select(Session, Cursor)
        .join(Cursor, Cursor.session_id == Session.id)
        .where(Session.last_seq > Cursor.processed_seq)
        .where(Cursor.status != "quarantined")
    )
    if session_ids:
        q = q.where(Session.id.in_(session_ids))
    else:
        q = (
            q.where(Session.rounds >= rules.min_rounds)
            .where(Session.updated_at <= now - rules.quiet)
            .where(Session.updated_at >= now - rules.max_age)
        )
    if user_id:
        q = q.where(Session.user_id == user_id)
    q = q.order_by(Session.updated_at, Session.id).limit(rules.limit)
    return list(s.exec(q).all())


def owner_key(sess: Session) -> tuple:
    """Who a session's memories belong to, and how it is read: sessions that share extraction calls share this."""
    return (sess.user_id, sess.agent_id, sess.project, sess.team, sess.mode)


def session_groups(sessions: Sequence[Session], size: int) -> list[list[Session]]:
    """Consecutive sessions of one owner and mode, at most `size` a group, in the order given
    (oldest first stays oldest first: a later session's facts still land after an earlier one's)."""
    groups: list[list[Session]] = []
    for sess in sessions:
        last = groups[-1] if groups else None
        if last is not None and len(last) < size and owner_key(last[0]) == owner_key(sess):
            last.append(sess)
        else:
            groups.append([sess])
    return groups
