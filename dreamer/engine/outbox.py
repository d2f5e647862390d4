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
from typing import Any

from sqlalchemy import bindparam, delete, update
from sqlalchemy import select as select_columns
from sqlalchemy.engine import Connection, Engine, Row
from sqlmodel import col, select

from dreamer.core.errors import StoreError
from dreamer.core.models import Memory, ViewDue, utcnow
from dreamer.engine.markdown import sync as view_sync
from dreamer.engine.markdown import views as markdown
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import IndexPoint, Payload
from dreamer.store.db import conflict_insert, session_scope

log = logging.getLogger(__name__)


OUTBOX_COLUMNS = (  # what indexing a memory reads
    col(Memory.id),
    col(Memory.user_id),
    col(Memory.agent_id),
    col(Memory.project),
    col(Memory.team),
    col(Memory.kind),
    col(Memory.status),
    col(Memory.text),
    col(Memory.content_hash),
    col(Memory.importance),
    col(Memory.topic),
    col(Memory.created_at),
    col(Memory.valid_from),
    col(Memory.updated_at),
)


def payload_for(m: Memory | Row[*tuple[Any, ...]]) -> Payload:
    """The index payload of a memory (a record, or a row of `OUTBOX_COLUMNS`)."""
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
        "topic": m.topic,
        "created_at": m.created_at.timestamp(),
        "valid_from": m.valid_from.timestamp(),
    }


def drain(rt: Runtime, *, batch: int = 256, render: bool = True, users: Sequence[str] | None = None) -> int:
    """Index every memory waiting in the outbox and mark its user's Markdown view due; returns
    how many. With `render`, the due views of `users` are then rendered (None: every due view,
    also those a killed process left due); without, they wait (a dream pass renders once, at
    its end)."""
    total = 0
    while True:
        with rt.engine.connect() as conn:
            rows = conn.execute(
                select_columns(*OUTBOX_COLUMNS)
                .where(col(Memory.indexed_at).is_(None))
                .order_by(col(Memory.id))
                .limit(batch)
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


def render_due(rt: Runtime, users: Sequence[str] | None = None) -> int:
    """Render the views marked due (of `users`, or all), one renderer per user at a time across
    processes; a mark made after a render read SQL stays for the next time. Returns how many
    views were rendered."""
    rendered = 0
    for user_id, _ in due_views(rt.engine, users):
        with markdown.render_lock(markdown.user_dir(rt.settings.workspace_dir, user_id)):
            token = _due_token(rt.engine, user_id)  # again, under the lock: another may have rendered it
            if token is None:
                continue
            render_user(rt, user_id, due=True)
            clear_due(rt.engine, user_id, token)
            rendered += 1
    return rendered


def due_views(engine: Engine, users: Sequence[str] | None = None) -> list[tuple[str, int]]:
    """(user id, mark token) of every view marked due, or of those of `users`."""
    q = select(col(ViewDue.user_id), col(ViewDue.token)).order_by(col(ViewDue.user_id))
    if users is not None:
        q = q.where(col(ViewDue.user_id).in_(list(users)))
    with engine.connect() as conn:
        return [(u, v) for u, v in conn.execute(q)]


def _due_token(engine: Engine, user_id: str) -> int | None:
    return next((v for _, v in due_views(engine, [user_id])), None)


def clear_due(engine: Engine, user_id: str, token: int) -> bool:
    """Clear a user's due mark if it is still the one read (`token`); False if marked again since.
    Tokens are random, never reused, so a late clear cannot remove a newer mark."""
    with engine.begin() as conn:
        done = conn.execute(delete(ViewDue).where(col(ViewDue.user_id) == user_id).where(col(ViewDue.token) == token))
    return done.rowcount == 1


def render_user(rt: Runtime, user_id: str, *, due: bool = False, quiet: bool = False) -> view_sync.ViewReport:
    """Read a person's edits of one user's Markdown view back into SQL, then write the view from
    the current SQL records (call under the folder's render lock)."""
    return view_sync.render_view(rt, user_id, due=due, index=lambda: drain(rt, render=False), quiet=quiet)


def sync_views(rt: Runtime, users: Sequence[str] | None = None, *, quiet: bool = False) -> list[view_sync.ViewReport]:
    """Read back the views a person changed (of `users`; None: every folder of the workspace
    whose files differ from their last render) and render them again; with `users`, each is
    read back and rendered whether changed or not. `quiet`: see `view_sync.render_view`."""
    workspace = rt.settings.workspace_dir
    if users is None:
        folders = sorted(p for p in workspace.iterdir() if p.is_dir()) if workspace.is_dir() else []
        users = [u for u in (view_sync.state_owner(p) for p in folders if view_sync.touched(p)) if u is not None]
    reports = []
    for user_id in users:
        with markdown.render_lock(markdown.user_dir(workspace, user_id)):
            due = _due_token(rt.engine, user_id) is not None
            reports.append(render_user(rt, user_id, due=due, quiet=quiet))
    return reports


def render_now(rt: Runtime, user_id: str) -> None:
    """Mark one user's view due and render it now (a change outside the memories, such as a
    project's state, that the view shows)."""
    with rt.engine.begin() as conn:
        _mark_due(conn, [user_id])
    render_due(rt, [user_id])


def _upsert(rt: Runtime, rows: Sequence[Row[*tuple[Any, ...]]]) -> None:
    vectors: list[list[float] | None]
    if rt.embedder is not None:
        vectors = list(rt.embedder.embed([m.text for m in rows]))
    else:
        vectors = [None] * len(rows)
    points = [IndexPoint(memory_id=m.id, text=m.text, vector=v, payload=payload_for(m)) for m, v in zip(rows, vectors)]
    rt.index.upsert(points)


def _mark_indexed(rt: Runtime, rows: Sequence[Row[*tuple[Any, ...]]]) -> int | None:
    """Mark rows indexed unless they changed meanwhile (then they stay in the outbox), and their
    users' views due, in one transaction. Returns how many were marked, None if the driver
    cannot tell."""
    stmt = (
        update(Memory)
        .where(col(Memory.id) == bindparam("mid"))
        .where(col(Memory.updated_at) == bindparam("seen"))
        .where(col(Memory.indexed_at).is_(None))
        .values(indexed_at=utcnow())
    )
    with rt.engine.begin() as conn:
        result = conn.execute(stmt, [{"mid": m.id, "seen": m.updated_at} for m in rows])
        _mark_due(conn, sorted({m.user_id for m in rows}))
    return result.rowcount if conn.dialect.supports_sane_multi_rowcount else None


def _mark_due(conn: Connection, user_ids: list[str]) -> None:
    """Mark each user's view due with a fresh random token (sorted ids: no lock-order deadlock)."""
    upsert = conflict_insert(conn.dialect.name)
    if upsert is None:
        raise StoreError(f"views_due needs PostgreSQL or SQLite, not {conn.dialect.name}")
    stmt = upsert(ViewDue).values([{"user_id": u, "token": secrets.randbits(62)} for u in user_ids])
    conn.execute(stmt.on_conflict_do_update(index_elements=["user_id"], set_={"token": stmt.excluded.token}))


def reindex(rt: Runtime) -> int:
    """Rebuild the index from SQL, the system of record."""
    rt.index.clear()
    with session_scope(rt.engine) as s:
        s.exec(update(Memory).values(indexed_at=None))
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


def check(rt: Runtime) -> Drift:
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


def _differs(m: Memory, payload: Payload) -> bool:
    expected = payload_for(m)
    return any(payload.get(f) != expected[f] for f in CHECKED_FIELDS)


__all__ = [
    "Drift",
    "check",
    "clear_due",
    "drain",
    "due_views",
    "payload_for",
    "reindex",
    "render_due",
    "render_user",
    "sync_views",
]
