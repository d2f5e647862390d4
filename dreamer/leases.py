"""Lease rows with expiry: two workers never take the same session at once."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from sqlalchemy import delete, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from dreamer.db import session_scope
from dreamer.models import Lease, utcnow

log = logging.getLogger(__name__)


def acquire(engine: Engine, name: str, owner: str, ttl_seconds: float, now: datetime | None = None) -> bool:
    """Take the lease if it is free or expired; True when this owner holds it afterwards."""
    now = now or utcnow()
    expires = now + timedelta(seconds=ttl_seconds)
    try:
        with session_scope(engine) as s:
            s.add(Lease(name=name, owner=owner, expires_at=expires))
        return True
    except IntegrityError:
        pass
    with session_scope(engine) as s:
        result = s.exec(  # type: ignore[call-overload]
            update(Lease)
            .where(Lease.name == name)
            .where((Lease.expires_at < now) | (Lease.owner == owner))
            .values(owner=owner, expires_at=expires)
        )
        return bool(result.rowcount)


def release(engine: Engine, name: str, owner: str) -> None:
    with session_scope(engine) as s:
        s.exec(delete(Lease).where(Lease.name == name).where(Lease.owner == owner))  # type: ignore[call-overload]


def session_lease(session_id: int) -> str:
    return f"session:{session_id}"
