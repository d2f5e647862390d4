"""The derived views follow SQL through an outbox: memories with `indexed_at IS NULL` are
(re)upserted into the index, then marked indexed in the transaction that marks their users'
Markdown views due (`views_due`); due views are re-rendered from SQL, then cleared.

A crash between the SQL commit and either view loses nothing: the next drain picks the rows
(or the due marks) up again, deterministic point ids make the repeat upsert idempotent, and
rendering from SQL gives the same files again. Rows are marked once the index has acknowledged
their write: the embedded index keeps it in its write-ahead log from then on and flushes its
files to disk on its own schedule (`EdgeIndex`), not once per drain.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import bindparam, delete, update
from sqlmodel import select

from dreamer.core.errors import StoreError
from dreamer.core.models import Memory, ViewDue, utcnow
from dreamer.engine import markdown
from dreamer.index.base import IndexPoint
from dreamer.store import cabinet
from dreamer.store.db import conflict_insert, session_scope

log = logging.getLogger(__name__)


OUTBOX_COLUMNS = (  # what indexing a memory reads
    Memory.id,
    Memory.user_id,
    Memory.agent_id,
    Memory.project,
    Memory.team,
    Memory.kind,
    Memory.status,
    Memory.text,
    Memory.content_hash,
    Memory.importance,
    Memory.created_at,
    Memory.valid_from,
    Memory.updated_at,
)


def payload_for(m) -> dict:
    return {
        "memory_id": m.id,
        "user_id": m.user_id,
        "agent_id": m.agent_id,
        "project": m.project,
        "team": m.team,
        "kind": m.kind,
        "status": m.status,
        "text": m.text,
        "content_hash": m.content_hash,
        "importance": m.importance,
        "created_at": m.created_at.timestamp(),
        "valid_from": m.valid_from.timestamp(),
    }


def drain(rt, *, batch: int = 256, render: bool = True, users: Sequence[str] | None = None) -> int:
    """Index every memory waiting in the outbox and mark its user's Markdown view due; returns
    how many. With `render`, the due views of `users` are then rendered (None: every due view,
    also those a killed process left due); without, they wait (a dream pass renders once, at
    its end)."""
    total = 0
    while True:
        with rt.engine.connect() as conn:
            rows = conn.execute(
                select(*OUTBOX_COLUMNS).where(Memory.indexed_at.is_(None)).order_by(Memory.id).limit(batch)
            ).all()
        if not rows:
            break
        _upsert(rt, rows)
        marked = _mark_indexed(rt, rows)
        total += len(rows)
        if len(rows) < batch and marked == len(rows):
            break  # the outbox is empty now, unless a row changed meanwhile (then read it again)
    if render:
        render_due(rt, users)
    return total


def render_due(rt, users: Sequence[str] | None = None) -> int:
    """Render the views marked due (of `users`, or all), one renderer per user at a time across
    processes; a mark made after a render read SQL stays for the next time. Returns how many
    views were rendered."""
    rendered = 0
    for user_id, _ in due_views(rt.engine, users):
        with markdown.render_lock(markdown.user_dir(rt.settings.workspace_dir, user_id)):
            token = _due_token(rt.engine, user_id)  # again, under the lock: another may have rendered it
            if token is None:
                continue
            render_user(rt, user_id)
            clear_due(rt.engine, user_id, token)
            rendered += 1
    return rendered


def due_views(engine, users: Sequence[str] | None = None) -> list[tuple[str, int]]:
    """(user id, mark token) of every view marked due, or of those of `users`."""
    table = ViewDue.__table__
    q = select(table.c.user_id, table.c.token).order_by(table.c.user_id)
    if users is not None:
        q = q.where(table.c.user_id.in_(list(users)))
    with engine.connect() as conn:
        return [(u, v) for u, v in conn.execute(q)]


def _due_token(engine, user_id: str) -> int | None:
    return next((v for _, v in due_views(engine, [user_id])), None)


def clear_due(engine, user_id: str, token: int) -> bool:
    """Clear a user's due mark if it is still the one read (`token`); False if marked again since.
    Tokens are random, never reused, so a late clear cannot remove a newer mark."""
    table = ViewDue.__table__
    with engine.begin() as conn:
        done = conn.execute(delete(table).where(table.c.user_id == user_id).where(table.c.token == token))
    return done.rowcount == 1


VIEW_COLUMNS = (  # what the Markdown view reads of a memory
    Memory.id,
    Memory.user_id,
    Memory.kind,
    Memory.text,
    Memory.status,
    Memory.evidence,
    Memory.importance,
    Memory.untrusted,
    Memory.project,
    Memory.last_seen,
    Memory.updated_at,
)


def render_user(rt, user_id: str) -> None:
    """Write one user's Markdown view from the current SQL records."""
    with rt.engine.connect() as conn:
        memories = conn.execute(cabinet.current_query(user_id, *VIEW_COLUMNS)).all()
    files = markdown.render_user(rt.settings.workspace_dir, user_id, memories, dreams_cap=rt.settings.dreams_cap)
    markdown.write_files(files)


def _upsert(rt, rows) -> None:
    vectors: list[list[float] | None]
    if rt.embedder is not None:
        vectors = list(rt.embedder.embed([m.text for m in rows]))
    else:
        vectors = [None] * len(rows)
    points = [IndexPoint(memory_id=m.id, text=m.text, vector=v, payload=payload_for(m)) for m, v in zip(rows, vectors)]
    rt.index.upsert(points)


def _mark_indexed(rt, rows) -> int | None:
    """Mark rows indexed unless they changed meanwhile (then they stay in the outbox), and their
    users' views due, in one transaction. Returns how many were marked, None if the driver
    cannot tell."""
    table = Memory.__table__
    stmt = (
        update(table)
        .where(table.c.id == bindparam("mid"))
        .where(table.c.updated_at == bindparam("seen"))
        .where(table.c.indexed_at.is_(None))
        .values(indexed_at=utcnow())
    )
    with rt.engine.begin() as conn:
        result = conn.execute(stmt, [{"mid": m.id, "seen": m.updated_at} for m in rows])
        _mark_due(conn, sorted({m.user_id for m in rows}))
    return result.rowcount if conn.dialect.supports_sane_multi_rowcount else None


def _mark_due(conn, user_ids: list[str]) -> None:
    """Mark each user's view due with a fresh random token (sorted ids: no lock-order deadlock)."""
    table = ViewDue.__table__
    upsert = conflict_insert(conn.dialect.name)
    if upsert is None:
        raise StoreError(f"views_due needs PostgreSQL or SQLite, not {conn.dialect.name}")
    stmt = upsert(table).values([{"user_id": u, "token": secrets.randbits(62)} for u in user_ids])
    conn.execute(stmt.on_conflict_do_update(index_elements=["user_id"], set_={"token": stmt.excluded.token}))


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
        mid for mid, m in sql.items() if m.indexed_at is not None and mid in indexed and _differs(m, indexed[mid])
    )
    pending = sum(1 for m in rows if m.indexed_at is None)
    return Drift(sorted(set(sql) - set(indexed)), sorted(set(indexed) - set(sql)), pending, stale)


def _differs(m: Memory, payload: dict) -> bool:
    expected = payload_for(m)
    return any(payload.get(f) != expected[f] for f in CHECKED_FIELDS)


__all__ = ["Drift", "check", "clear_due", "drain", "due_views", "payload_for", "reindex", "render_due", "render_user"]
