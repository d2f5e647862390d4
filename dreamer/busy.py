"""Is the agent busy? The `BusySignal` protocol and its SQL and always-idle implementations."""

from __future__ import annotations

import logging
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Iterator, Protocol

from sqlalchemy import func, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import select

from dreamer.db import session_scope
from dreamer.models import Activity, utcnow

log = logging.getLogger(__name__)


class BusySignal(Protocol):
    def busy_reason(self, now: datetime | None = None) -> str | None:
        """Why the agent counts as busy now, or None when idle."""

    def begin(self, key: str) -> None: ...

    def end(self, key: str) -> None: ...


class AlwaysIdle:
    """For passes that must never wait (tests, `dreamer dream --force`)."""

    def busy_reason(self, now: datetime | None = None) -> str | None:
        return None

    def begin(self, key: str) -> None:
        return None

    def end(self, key: str) -> None:
        return None


class SqlBusySignal:
    """Activity rows in the SQL store: an in-flight counter and the last time seen, per key."""

    def __init__(self, engine: Engine, *, window_seconds: float) -> None:
        self.engine = engine
        self.window = timedelta(seconds=window_seconds)

    def busy_reason(self, now: datetime | None = None) -> str | None:
        now = now or utcnow()
        with session_scope(self.engine) as s:
            in_flight = s.exec(select(func.coalesce(func.sum(Activity.in_flight), 0))).one()
            recent = s.exec(
                select(func.count()).select_from(Activity).where(Activity.last_seen > now - self.window)
            ).one()
        if in_flight:
            return f"{in_flight} request(s) in flight"
        if recent:
            return f"activity within the last {int(self.window.total_seconds())} s"
        return None

    def begin(self, key: str) -> None:
        self._bump(key, +1)

    def end(self, key: str) -> None:
        self._bump(key, -1)

    def _bump(self, key: str, delta: int) -> None:
        now = utcnow()
        stmt = (
            update(Activity)
            .where(Activity.key == key)
            .values(in_flight=func.max(Activity.in_flight + delta, 0) if self._sqlite else
                    func.greatest(Activity.in_flight + delta, 0), last_seen=now)
        )
        with session_scope(self.engine) as s:
            if s.exec(stmt).rowcount:  # type: ignore[call-overload]
                return
        try:
            with session_scope(self.engine) as s:
                s.add(Activity(key=key, in_flight=max(delta, 0), last_seen=now))
        except IntegrityError:
            with session_scope(self.engine) as s:
                s.exec(stmt)  # type: ignore[call-overload]

    @property
    def _sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"


def activity_key(*, user_id: str | None = None, agent_id: str | None = None) -> str:
    return f"agent:{agent_id}" if agent_id else f"user:{user_id or '-'}"


@contextmanager
def activity(signal: BusySignal, *, user_id: str | None = None, agent_id: str | None = None) -> Iterator[None]:
    """Mark the agent active for the duration of a block."""
    key = activity_key(user_id=user_id, agent_id=agent_id)
    signal.begin(key)
    try:
        yield
    finally:
        signal.end(key)


__all__ = ["AlwaysIdle", "BusySignal", "SqlBusySignal", "activity", "activity_key"]
