"""The index follows SQL through an outbox: memories with `indexed_at IS NULL` are (re)upserted.

A crash between the SQL commit and the upsert loses nothing: the next drain picks the rows
up again, and deterministic point ids make the repeat upsert idempotent.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy import update
from sqlmodel import select

from dreamer.db import session_scope
from dreamer.index import IndexPoint
from dreamer.models import Memory, utcnow

log = logging.getLogger(__name__)


def payload_for(m: Memory) -> dict:
    return {
        "memory_id": m.id,
        "user_id": m.user_id,
        "agent_id": m.agent_id,
        "project": m.project,
        "team": m.team,
        "kind": m.kind,
        "status": m.status,
        "text": m.text,
        "importance": m.importance,
        "created_at": m.created_at.timestamp(),
        "valid_from": m.valid_from.timestamp(),
    }


def drain(rt, *, batch: int = 256) -> int:
    """Upsert every memory waiting in the outbox; returns how many were indexed."""
    total = 0
    while True:
        with session_scope(rt.engine) as s:
            rows = s.exec(select(Memory).where(Memory.indexed_at.is_(None)).order_by(Memory.id).limit(batch)).all()
        if not rows:
            return total
        _upsert(rt, rows)
        _mark_indexed(rt, rows)
        total += len(rows)


def _upsert(rt, rows: list[Memory]) -> None:
    vectors: list[list[float] | None]
    if rt.embedder is not None:
        vectors = list(rt.embedder.embed([m.text for m in rows]))
    else:
        vectors = [None] * len(rows)
    points = [IndexPoint(memory_id=m.id, text=m.text, vector=v, payload=payload_for(m)) for m, v in zip(rows, vectors)]
    rt.index.upsert(points)


def _mark_indexed(rt, rows: list[Memory]) -> None:
    """Mark rows indexed unless they changed meanwhile (then they stay in the outbox)."""
    now = utcnow()
    with session_scope(rt.engine) as s:
        for m in rows:
            s.exec(  # type: ignore[call-overload]
                update(Memory)
                .where(Memory.id == m.id)
                .where(Memory.updated_at == m.updated_at)
                .where(Memory.indexed_at.is_(None))
                .values(indexed_at=now)
            )


def reindex(rt) -> int:
    """Rebuild the index from SQL, the system of record."""
    rt.index.clear()
    with session_scope(rt.engine) as s:
        s.exec(update(Memory).values(indexed_at=None))  # type: ignore[call-overload]
    return drain(rt)


@dataclass
class Drift:
    missing: list[str]  # in SQL, not in the index
    extra: list[str]  # in the index, not in SQL
    pending: int  # still in the outbox

    @property
    def clean(self) -> bool:
        return not self.missing and not self.extra and not self.pending


def check(rt) -> Drift:
    """Compare the index with SQL without changing either."""
    with session_scope(rt.engine) as s:
        sql_ids = set(s.exec(select(Memory.id)).all())
        pending = len(s.exec(select(Memory.id).where(Memory.indexed_at.is_(None))).all())
    indexed = rt.index.all_ids()
    return Drift(sorted(sql_ids - indexed), sorted(indexed - sql_ids), pending)


__all__ = ["Drift", "check", "drain", "payload_for", "reindex"]
