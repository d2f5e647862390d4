"""Forget means gone: once a cascade forget took rows out of SQL, no copy of their text is left
in the store's files. The index is rewritten without the erased points (a deleted point
otherwise lingers in the segment and log files: `MemoryIndex.erase`), the Markdown follows (a
user's folder goes; else their daily-note lines go and the view is rendered again), and a
SQLite store is rebuilt (`scrub_sqlite`). `Place`s say where the text is, for a dry run.

While the index is rewritten every memory it held waits in the outbox: a process stopped
half way leaves them to be indexed again by the next drain, never marked indexed but missing.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, update
from sqlalchemy import select as select_columns
from sqlalchemy.engine import Engine
from sqlmodel import col

from dreamer.core.models import Memory, utcnow
from dreamer.engine import outbox
from dreamer.engine.markdown import views as markdown
from dreamer.engine.runtime import Runtime
from dreamer.store.db import scrub_sqlite

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Place:
    """Somewhere the forgotten text is: `kind` sql (a table), index (its points) or markdown (a
    file of the user's folder), with how many rows, points or entries of it."""

    kind: str
    name: str
    count: int

    def describe(self) -> str:
        return f"{self.kind} {self.name}: {self.count}"

    def json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "count": self.count}


def index_places(rt: Runtime, memory_ids: Collection[str]) -> list[Place]:
    """The index's points of these memories, if it holds any."""
    held = len(rt.index.all_ids() & set(memory_ids)) if memory_ids else 0
    return [Place("index", "points", held)] if held else []


def markdown_places(rt: Runtime, user_id: str, memory_ids: Collection[str] | None) -> list[Place]:
    """The user's Markdown files that show these memories (None: any of theirs)."""
    folder = markdown.user_dir(rt.settings.workspace_dir, user_id)
    return [Place("markdown", rel, n) for rel, n in markdown.entries_held(folder, memory_ids).items()]


def follow(rt: Runtime, user_id: str, memory_ids: list[str], *, whole_user: bool) -> float:
    """After the rows went: the index, the Markdown and the SQL files follow. Returns the
    seconds the index rewrite took."""
    outbox.drain(rt, users=[user_id], render=False)  # the memories kept with less evidence
    started = time.perf_counter()
    rewrite_index(rt, memory_ids)
    seconds = time.perf_counter() - started
    folder = markdown.user_dir(rt.settings.workspace_dir, user_id)
    if whole_user:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        markdown.drop_daily_notes(rt.settings.workspace_dir, user_id, set(memory_ids))
        outbox.render_now(rt, user_id)
    scrub_sqlite(rt.engine)
    return seconds


def rewrite_index(rt: Runtime, memory_ids: list[str]) -> int | None:
    """Erase these memories' points (`MemoryIndex.erase`), and in an index of files of its own
    those of any memory no longer in SQL too (a forget stopped before its rewrite leaves them;
    running it again takes them out); how many points were kept, None where the points were
    only deleted (a server)."""
    if not rt.index.keeps_files:
        return rt.index.erase(memory_ids)
    seen = _unmark(rt.engine)
    orphans = rt.index.all_ids() - _memory_ids(rt.engine)
    kept = rt.index.erase(sorted({*memory_ids, *orphans}))
    _remark(rt.engine, seen)
    log.info("index rewritten without %d memories, %s points kept", len(memory_ids) + len(orphans), kept)
    return kept


def _unmark(engine: Engine) -> list[dict[str, Any]]:
    """Put every indexed memory back in the outbox; (id, updated_at) of each, as `_remark` takes them."""
    indexed = col(Memory.indexed_at).is_not(None)
    with engine.begin() as conn:
        rows = conn.execute(select_columns(col(Memory.id), col(Memory.updated_at)).where(indexed)).all()
        conn.execute(update(Memory).where(indexed).values(indexed_at=None))
    return [{"mid": mid, "seen": at} for mid, at in rows]


def _memory_ids(engine: Engine) -> set[str]:
    """Every memory id in SQL."""
    with engine.connect() as conn:
        return set(conn.execute(select_columns(col(Memory.id))).scalars())


def _remark(engine: Engine, rows: list[dict[str, Any]]) -> None:
    """Mark indexed again the memories `_unmark` took out that did not change meanwhile."""
    if not rows:
        return
    stmt = (
        update(Memory)
        .where(col(Memory.id) == bindparam("mid"))
        .where(col(Memory.updated_at) == bindparam("seen"))
        .where(col(Memory.indexed_at).is_(None))
        .values(indexed_at=utcnow())
    )
    with engine.begin() as conn:
        conn.execute(stmt, rows)
