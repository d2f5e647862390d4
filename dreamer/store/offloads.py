"""The bodies a compaction offloaded: written in one transaction with their secrets redacted (as
messages are stored), read back by id only within the scope that wrote them."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.engine import Engine

from dreamer.core.compaction.plan import Offload
from dreamer.core.errors import NotFound
from dreamer.core.models import OffloadedBody, utcnow
from dreamer.core.scope import Scope
from dreamer.store.db import session_scope
from dreamer.store.gate import new_offload


def save_offloads(
    engine: Engine, scope: Scope, offloads: Sequence[Offload], *, session_id: str | None = None, raw: bool = False
) -> list[OffloadedBody]:
    """Store each offloaded body under the scope (redacted unless `raw`); all or none."""
    now = utcnow()
    rows = [
        new_offload(
            id=o.id,
            user_id=scope.user_id,
            agent_id=scope.agent_id,
            project=scope.project,
            team=scope.team,
            session_id=session_id,
            role=o.role,
            tool=o.tool or None,
            tool_call_id=o.tool_call_id,
            body=o.body,
            raw=raw,
            tokens=o.tokens,
            created_at=now,
        )
        for o in offloads
    ]
    with session_scope(engine) as s:
        s.add_all(rows)
    return rows


def read_offload(engine: Engine, scope: Scope, offload_id: str) -> OffloadedBody:
    """The body `offload_id` when the scope may see it; NotFound otherwise (another's too)."""
    with session_scope(engine) as s:
        row = s.get(OffloadedBody, offload_id)
    if row is None or not scope.matches(row):
        raise NotFound(f"no offloaded body {offload_id}")
    return row
