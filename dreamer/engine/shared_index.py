"""An embedded index taken in turns, so several processes (Celery workers, the daemon, a CLI
reprocess) can share one Qdrant Edge folder.

Qdrant Edge locks its folder: one process at a time. A `TimeSharedIndex` opens the folder on
first use and closes it at `release()` (the end of a task or a pass), after waiting its turn on
a lock file beside the folder. The parallel part of a pass (loading sessions, LLM extraction)
never touches the index, so it runs in every worker at once; consolidation (neighbour search,
apply, outbox drain) holds the turn and is therefore serialised, which is also what keeps two
workers from adding the same new memory for one user: such an index `takes_turns`, and its
runtime takes no per-user consolidation lock (`dreamer.user_locks`; waiting for one while
holding the turn could deadlock). With a Qdrant server (`DREAMER_QDRANT_URL`) there are no
turns: every process keeps its own client, and a writer holds its user's consolidation lock
(a lease row in SQL) from planning until its result is in the index instead.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Unpack

from dreamer.core.errors import IndexInUse, Retryable
from dreamer.core.private import private_dir
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.runtime import UNSET, Parts, Runtime
from dreamer.index.build import build_index
from dreamer.index.contract import Hit, IndexPoint, MemoryIndex, Payload, SearchFilter

log = logging.getLogger(__name__)

TURN_FILE = "index.turn"


class IndexBusy(Retryable, IndexInUse):
    """The embedded index stayed in use by other processes for longer than we may wait."""


class TimeSharedIndex:
    """A `MemoryIndex` that opens the real one on first use and gives it back at `release()`."""

    takes_turns = True  # consolidation is one process at a time already (see `user_locks`)
    keeps_files = True  # an embedded index, in the data dir

    def __init__(
        self,
        factory: Callable[[], MemoryIndex],
        turn_file: Path,
        *,
        dim: int,
        wait_seconds: float,
        poll_seconds: float = 0.05,
    ) -> None:
        self.factory = factory
        self.turn_file = Path(turn_file)
        self.dim = dim
        self.wait_seconds = wait_seconds
        self.poll_seconds = poll_seconds
        self._inner: MemoryIndex | None = None
        self._fd: int | None = None
        self._guard = threading.RLock()

    # -- turns

    @property
    def held(self) -> bool:
        return self._inner is not None

    def _index(self) -> MemoryIndex:
        with self._guard:
            if self._inner is None:
                self._inner = self._take_turn()
            return self._inner

    def _take_turn(self) -> MemoryIndex:
        deadline = time.monotonic() + self.wait_seconds
        while True:
            if self._try_lock():
                try:
                    return self._open()
                except IndexInUse as exc:  # a process outside the turns (a CLI command) holds it
                    self._unlock()
                    last = exc
            else:
                last = None
            if time.monotonic() >= deadline:
                why = f": {last}" if last else ""
                raise IndexBusy(f"the index was not free within {self.wait_seconds:g} s{why}", delay=5.0)
            time.sleep(self.poll_seconds)

    def _open(self) -> MemoryIndex:
        index = self.factory()
        log.debug("index turn taken by pid %s", os.getpid())
        return index

    def _try_lock(self) -> bool:
        private_dir(self.turn_file.parent)
        fd = os.open(self.turn_file, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def _unlock(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def release(self) -> None:
        """Close the real index and let the next process have it. Safe to call when not held."""
        with self._guard:
            try:
                if self._inner is not None:
                    self._inner.close()
            finally:
                self._inner = None
                self._unlock()

    def close(self) -> None:
        self.release()

    # -- the MemoryIndex contract, delegated

    def upsert(self, points: list[IndexPoint]) -> None:
        self._index().upsert(points)

    def delete(self, memory_ids: list[str]) -> None:
        self._index().delete(memory_ids)

    def erase(self, memory_ids: list[str]) -> int | None:
        return self._index().erase(memory_ids)

    def search_dense(self, vector: list[float], scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        return self._index().search_dense(vector, scope, limit, flt)

    def search_dense_many(
        self, vectors: Sequence[Sequence[float]], scope: Scope, limit: int, flt: SearchFilter | None = None
    ) -> list[list[Hit]]:
        return self._index().search_dense_many(vectors, scope, limit, flt)

    def search_text(self, query: str, scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        return self._index().search_text(query, scope, limit, flt)

    def candidate_scores(
        self, vector: Sequence[float], scope: Scope, memory_ids: Sequence[str], flt: SearchFilter | None = None
    ) -> tuple[dict[str, float], dict[str, float]]:
        return self._index().candidate_scores(vector, scope, memory_ids, flt)

    def all_ids(self) -> set[str]:
        return self._index().all_ids()

    def payloads(self, fields: Sequence[str]) -> dict[str, Payload]:
        return self._index().payloads(fields)

    def count(self) -> int:
        return self._index().count()

    def clear(self) -> None:
        self._index().clear()


def build_shared_index(settings: Settings, dim: int) -> MemoryIndex:
    """A Qdrant server client when one is configured, else the embedded index taken in turns."""
    if settings.qdrant_url:
        return build_index(settings, dim)
    return TimeSharedIndex(
        lambda: build_index(settings, dim),
        settings.data_dir / TURN_FILE,
        dim=dim,
        wait_seconds=settings.index_wait_seconds,
    )


def open_shared_runtime(settings: Settings, **parts: Unpack[Parts]) -> Runtime:
    """The one Runtime of a long-lived process (worker, daemon): built once, index in turns."""
    rt = Runtime.open(settings, **parts)
    if "index" not in parts or parts["index"] is UNSET:
        embedder = rt.embedder
        dim = embedder.dim if embedder is not None else settings.embed_dim
        rt.adopt_index(DocumentedIndex.from_settings(build_shared_index(settings, dim), rt.engine, settings, embedder))
    return rt


def end_turn(rt: Runtime) -> None:
    """Give the embedded index back after a task or a pass (a no-op for a server index)."""
    release = getattr(rt.opened_index, "release", None)
    if release is not None:
        release()
