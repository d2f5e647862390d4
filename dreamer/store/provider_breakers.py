"""The external memory provider's circuit breaker as the store keeps it (`ProviderBreaker`):
written by the process whose guard changed it, read by `dreamer status` in any shell, whatever
memory mode that shell's settings name."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from dreamer.core.models import ProviderBreaker, utcnow
from dreamer.store.db import session_scope


def record(engine: Engine, state: dict[str, Any]) -> None:
    """Keep `state` ({"provider", "breaker", "reason", "changes"}) as the provider's breaker. Two
    processes that create its row at once: the second finds the first's and updates it."""
    try:
        _set(engine, state)
    except IntegrityError:
        _set(engine, state)


def _set(engine: Engine, state: dict[str, Any]) -> None:
    with session_scope(engine) as s:
        row = s.get(ProviderBreaker, state["provider"]) or ProviderBreaker(provider=state["provider"], breaker="closed")
        row.breaker, row.reason = state["breaker"], state.get("reason")
        row.changes, row.updated_at = list(state.get("changes") or []), utcnow()
        s.add(row)


def latest(engine: Engine) -> ProviderBreaker | None:
    """The breaker changed last, of whichever provider (detached: safe to read after)."""
    with session_scope(engine) as s:
        row = s.exec(select(ProviderBreaker).order_by(col(ProviderBreaker.updated_at).desc()).limit(1)).first()
        if row is not None:
            s.expunge(row)
        return row
