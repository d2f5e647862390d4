"""Which sessions a pass takes: new messages past the cursor, not quarantined, quiet long
enough, enough rounds (or, for a short session, quiet for longer), not too old; oldest first, at most a pass's worth; why the others are
held back; and which of the taken share extraction calls (consecutive sessions of one owner)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import or_
from sqlmodel import Session as DBSession
from sqlmodel import col, select
from sqlmodel.sql.expression import Select

from dreamer.core.models import Cursor, Session
from dreamer.core.settings import Settings
from dreamer.ingest.base import as_utc

HeldBy = Literal["nothing_new", "quarantined", "min_rounds", "quiet_period", "max_age"]


@dataclass(frozen=True)
class DueRules:
    min_rounds: int
    quiet: timedelta
    max_age: timedelta
    limit: int
    short_quiet: timedelta  # a session of fewer than `min_rounds` rounds is due once quiet this long

    @classmethod
    def from_settings(cls, settings: Settings) -> DueRules:
        return cls(
            min_rounds=settings.min_rounds,
            quiet=timedelta(seconds=settings.quiet_period_seconds),
            max_age=timedelta(days=settings.max_age_days),
            limit=settings.max_sessions_per_pass,
            short_quiet=timedelta(seconds=settings.short_quiet_seconds),
        )


@dataclass(frozen=True)
class Hold:
    """Why a session is held back from a pass: the rule (`by`) and what it found, naming the setting."""

    by: HeldBy
    reason: str

    def __str__(self) -> str:
        return f"{self.by}: {self.reason}"


def hold_reason(
    *,
    last_seq: int,
    processed_seq: int,
    status: str,
    rounds: int,
    updated_at: datetime,
    now: datetime,
    rules: DueRules,
    explicit: bool = False,
    forced: bool = False,
) -> Hold | None:
    """The policy, as a pure function: why a pass would not take the session, None when it is due.

    A session of fewer than `min_rounds` rounds waits until it has been quiet for `short_quiet`.
    An explicitly named session skips the quiet, rounds and age rules, never quarantine; a forced
    pass skips the waits (quiet, and a short session's), never quarantine or age."""
    if last_seq <= processed_seq:
        return Hold("nothing_new", f"no message past {processed_seq}")
    if status == "quarantined":
        return Hold("quarantined", "use `dreamer reprocess --quarantined`")
    if explicit:
        return None
    updated_at = as_utc(updated_at)  # SQLite hands back naive UTC
    ago = int(max(now - updated_at, timedelta(0)).total_seconds())
    if not forced and rounds < rules.min_rounds and updated_at > now - rules.short_quiet:
        short = int(rules.short_quiet.total_seconds())
        return Hold(
            "min_rounds",
            f"{rounds} of {rules.min_rounds} rounds (DREAMER_MIN_ROUNDS); a shorter session is due once quiet "
            f"{short} s, active {ago} s ago (DREAMER_SHORT_QUIET_SECONDS)",
        )
    quiet = int(rules.quiet.total_seconds())
    if not forced and updated_at > now - rules.quiet:
        return Hold("quiet_period", f"active {ago} s ago, quiet after {quiet} s (DREAMER_QUIET_PERIOD_SECONDS)")
    if updated_at < now - rules.max_age:
        days = (now - updated_at).days
        return Hold("max_age", f"active {days} days ago, over {rules.max_age.days} (DREAMER_MAX_AGE_DAYS)")
    return None


def session_hold(
    sess: Session, cursor: Cursor, rules: DueRules, now: datetime, *, explicit: bool = False, forced: bool = False
) -> Hold | None:
    """`hold_reason` for a stored session and its cursor."""
    return hold_reason(
        last_seq=sess.last_seq,
        processed_seq=cursor.processed_seq,
        status=cursor.status,
        rounds=sess.rounds,
        updated_at=sess.updated_at,
        now=now,
        rules=rules,
        explicit=explicit,
        forced=forced,
    )


def due_sessions(
    s: DBSession,
    rules: DueRules,
    now: datetime,
    *,
    session_ids: list[int] | None = None,
    user_id: str | None = None,
    forced: bool = False,
) -> list[tuple[Session, Cursor]]:
    """The sessions a pass takes, oldest first, at most `rules.limit`. The query narrows by the
    same rules (so the database does the scan); `hold_reason` has the last word."""
    q = _pending(session_ids, user_id)
    if not session_ids:
        if not forced:
            q = q.where(
                or_(col(Session.rounds) >= rules.min_rounds, col(Session.updated_at) <= now - rules.short_quiet)
            ).where(col(Session.updated_at) <= now - rules.quiet)
        q = q.where(col(Session.updated_at) >= now - rules.max_age)
    rows: Sequence[tuple[Session, Cursor]] = s.exec(
        q.where(col(Cursor.status) != "quarantined").limit(rules.limit)
    ).all()
    explicit = bool(session_ids)
    return [(a, b) for a, b in rows if session_hold(a, b, rules, now, explicit=explicit, forced=forced) is None]


def held_sessions(
    s: DBSession,
    rules: DueRules,
    now: datetime,
    *,
    session_ids: list[int] | None = None,
    user_id: str | None = None,
    forced: bool = False,
) -> list[tuple[Session, Hold | None]]:
    """The sessions with new messages, oldest first, each with what holds it back (None: due,
    yet not taken, as past a pass's `rules.limit`)."""
    explicit = bool(session_ids)
    rows: Sequence[tuple[Session, Cursor]] = s.exec(_pending(session_ids, user_id)).all()
    return [(a, session_hold(a, b, rules, now, explicit=explicit, forced=forced)) for a, b in rows]


def _pending(session_ids: list[int] | None, user_id: str | None) -> Select[Session, Cursor]:
    """Sessions (and their cursors) with messages past the cursor, oldest first."""
    q = (
        select(Session, Cursor)
        .join(Cursor, col(Cursor.session_id) == col(Session.id))
        .where(col(Session.last_seq) > col(Cursor.processed_seq))
    )
    if session_ids:
        q = q.where(col(Session.id).in_(session_ids))
    if user_id:
        q = q.where(col(Session.user_id) == user_id)
    return q.order_by(col(Session.updated_at), col(Session.id))


def owner_key(sess: Session) -> tuple[str, str | None, str | None, str | None, str]:
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
