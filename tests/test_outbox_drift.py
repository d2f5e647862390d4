"""`reindex --check` reports every kind of drift between the index and SQL and exits 1 on any:
missing points, extra points, rows still in the outbox, and stale payloads."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

from sqlalchemy import update

from dreamer.core.models import Memory
from dreamer.core.settings import Settings
from dreamer.engine import outbox
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import IndexPoint
from dreamer.index.edge import EdgeIndex
from dreamer.store import cabinet, db
from dreamer.store.db import session_scope


def check(data_dir):
    env = {**os.environ, "DREAMER_DATA_DIR": str(data_dir), "DREAMER_EMBEDDER": "none", "DREAMER_LLM_BASE_URL": ""}
    done = subprocess.run(
        [sys.executable, "-m", "dreamer", "reindex", "--check"], capture_output=True, text=True, env=env, timeout=120
    )
    return done.returncode, done.stdout.strip()


def test_every_kind_of_drift_is_reported(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", embedder="none")
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    with Runtime.open(settings, engine=engine, llm=None, embedder=None) as rt:
        with session_scope(engine) as s:
            ids = [
                cabinet.add_memory(
                    s,
                    user_id="u",
                    kind="preference",
                    text=f"The user prefers item {i}.",
                    source="dream",
                    evidence=[{"session_id": i, "seqs": [1]}],
                ).id
                for i in range(4)
            ]
        outbox.drain(rt)
        assert outbox.check(rt).clean
        with session_scope(engine) as s:  # changed in SQL behind the outbox's back
            s.exec(update(Memory).where(Memory.id == ids[0]).values(status="forgotten"))
            s.exec(update(Memory).where(Memory.id == ids[1]).values(indexed_at=None))
        rt.index.delete([ids[2]])
        rt.index.upsert([IndexPoint("ghost", "a ghost", None, {"user_id": "u", "status": "candidate"})])
        drift = outbox.check(rt)
        assert (drift.stale, drift.pending, drift.missing, drift.extra) == ([ids[0]], 1, [ids[2]], ["ghost"])
    assert check(settings.data_dir) == (1, "missing 1, extra 1, pending 1, stale 1")
    with Runtime.open(settings, engine=engine, llm=None, embedder=None) as rt:
        outbox.reindex(rt)
    assert check(settings.data_dir) == (0, "missing 0, extra 0, pending 0, stale 0")
    engine.dispose()


class EditedDuringUpsert:
    """A real index that lets another writer change a row once, right after the first upsert
    (between the outbox's index write and its marking the rows indexed)."""

    def __init__(self, inner, edit) -> None:
        self.inner, self.edit, self.edited = inner, edit, False

    def upsert(self, points):
        self.inner.upsert(points)
        if not self.edited:
            self.edited = True
            self.edit()

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_row_changed_while_it_is_drained_is_drained_again(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", embedder="none")
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    with session_scope(engine) as s:
        ids = [
            cabinet.add_memory(
                s,
                user_id="u",
                kind="preference",
                text=f"The user prefers item {i}.",
                source="dream",
                evidence=[{"session_id": i, "seqs": [1]}],
            ).id
            for i in range(3)
        ]

    def edit():
        with session_scope(engine) as s:
            m = s.get(Memory, ids[1])
            m.text, m.updated_at = "The user prefers item one, changed.", m.updated_at + timedelta(seconds=1)

    edge = EdgeIndex(settings.index_dir, settings.embed_dim)
    index = EditedDuringUpsert(edge, edit)
    with Runtime.open(settings, engine=engine, llm=None, embedder=None, index=index) as rt:
        assert outbox.drain(rt) == 4
        assert index.edited
        assert outbox.check(rt).clean
        assert rt.index.payloads(["text"])[ids[1]] == {"text": "The user prefers item one, changed."}
    edge.close()
    engine.dispose()
