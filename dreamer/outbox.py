"""The derived views follow SQL through an outbox: memories with `indexed_at IS NULL` are
(re)upserted into the index and their users' Markdown files re-rendered, then marked.

A crash between the SQL commit and either view loses nothing: the next drain picks the rows
up again, deterministic point ids make the repeat upsert idempotent, and rendering from SQL
gives the same files again. Rows are marked once the index has acknowledged their write: the
embedded index keeps it in its write-ahead log from then on and flushes its files to disk on
its own schedule (`EdgeIndex`), not once per drain.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from sqlalchemy import bindparam, update
from sqlmodel import select

from dreamer import cabinet, markdown
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
    """Index every memory waiting in the outbox and render its user's files; returns how many."""
    total = 0
    while True:
        with session_scope(rt.engine) as s:
            rows = s.exec(select(Memory).where(Memory.indexed_at.is_(None)).order_by(Memory.id).limit(batch)).all()
        if not rows:
            return total
        _upsert(rt, rows)
        for user_id in sorted({m.user_id for m in rows}):
            render_user(rt, user_id)
        _mark_indexed(rt, rows)
        total += len(rows)


def render_user(rt, user_id: str) -> None:
    """Write one user's Markdown view from the current SQL records."""
    with session_scope(rt.engine) as s:
        memories = cabinet.current_memories(s, user_id)
    files = markdown.render_user(rt.settings.workspace_dir, user_id, memories, dreams_cap=rt.settings.dreams_cap)
    markdown.write_files(files)


def _upsert(rt, rows: list[Memory]) -> None:
    vectors: list[list[float] | None]
    if rt.embedder is not None:
        vectors = list(rt.embedder.embed([m.text for m in rows]))
    else:
        vectors = [None] * len(rows)
    points = [IndexPoint(memory_id=m.id, text=m.text, vector=v, payload=payload_for(m)) for m, v in zip(rows, vectors)]
    rt.index.upsert(points)


def _mark_indexed(rt, rows: list[Memory]) -> None:
    """Mark rows indexed unless they changed meanwhile (then they stay in the outbox); one
    statement executed for every row."""
    table = Memory.__table__
    stmt = (
        update(table)
        .where(table.c.id == bindparam("mid"))
        .where(table.c.updated_at == bindparam("seen"))
        .where(table.c.indexed_at.is_(None))
        .values(indexed_at=utcnow())
    )
    with rt.engine.begin() as conn:
        conn.execute(stmt, [{"mid": m.id, "seen": m.updated_at} for m in rows])


def reindex(rt) -> int:
    """Rebuild the index from SQL, the system of record."""
    rt.index.clear()
    with session_scope(rt.engine) as s:
        s.exec(update(Memory).values(indexed_at=None))  # type: ignore[call-overload]
    return drain(rt)


CHECKED_FIELDS = ("user_id", "agent_id", "project", "team", "kind", "status", "text")


@dataclass
class Drift:
    missing: list[str]  # in SQL, not in the index
    extra: list[str]  # in the index, not in SQL
    pending: int  # still in the outbox
    stale: list[str] = field(default_factory=list)  # indexed, but the payload differs from SQL

    @property
    def clean(self) -> bool:
        return not self.missing and not self.extra and not self.pending and not self.stale


def check(rt) -> Drift:
    """Compare the index with SQL (ids, and the scope, kind, status and text of each indexed
    memory) without changing either."""
    with session_scope(rt.engine) as s:
        rows = s.exec(select(Memory)).all()
    indexed = rt.index.payloads(CHECKED_FIELDS)
    sql = {m.id: m for m in rows}
    stale = sorted(
        mid for mid, m in sql.items()
        if m.indexed_at is not None and mid in indexed and _differs(m, indexed[mid])
    )
    pending = sum(1 for m in rows if m.indexed_at is None)
    return Drift(sorted(set(sql) - set(indexed)), sorted(set(indexed) - set(sql)), pending, stale)


def _differs(m: Memory, payload: dict) -> bool:
    expected = payload_for(m)
    return any(payload.get(f) != expected[f] for f in CHECKED_FIELDS)


__all__ = ["Drift", "check", "drain", "payload_for", "reindex", "render_user"]
