"""`EdgeIndex`: the memory index as an embedded Qdrant Edge shard in a folder, translating the
shared searches and writes into Edge's request types."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from uuid import UUID

import qdrant_edge as qe

from dreamer.core.errors import ConfigError, IndexFailure
from dreamer.core.private import private_dir
from dreamer.index.contract import SCROLL_PAGE, UPSERT_BATCH, Hit, IndexPoint, Payload, point_id
from dreamer.index.edge_shard import LOCK_FILE, lock_folder, new_shard, open_shard, unlock_folder
from dreamer.index.points import point_vectors, stored_payload
from dreamer.index.qdrant import QdrantIndex, Search, hit, index_errors
from dreamer.index.query import build_filter

log = logging.getLogger(__name__)

FLUSH_SECONDS = 5.0
REWRITE_SUFFIX = ".rewrite"  # the folder beside the index that `erase` builds the new shard in

EdgeOffset = int | UUID | str


def disk_flush_due(unflushed: int, since_flush: float, every_seconds: float) -> bool:
    """Whether acknowledged writes should reach the segment files now: never when there are
    none, after every write when `every_seconds` is 0, else once that many seconds have passed."""
    return unflushed > 0 and since_flush >= every_seconds


class EdgeTerms:
    """Filter conditions as Qdrant Edge types."""

    def has_id(self, point_ids: list[str]) -> qe.HasIdCondition:
        return qe.HasIdCondition(set(point_ids))

    def equals(self, key: str, value: str) -> qe.FieldCondition:
        return qe.FieldCondition(key, match=qe.MatchValue(value))

    def any_of(self, key: str, values: list[str]) -> qe.FieldCondition:
        return qe.FieldCondition(key, match=qe.MatchAny(values))

    def in_range(self, key: str, gte: float | None, lt: float | None) -> qe.FieldCondition:
        return qe.FieldCondition(key, range=qe.RangeFloat(gte=gte, lt=lt))

    def is_empty(self, key: str) -> qe.IsEmptyCondition:
        return qe.IsEmptyCondition(key)

    def all_of(self, must: list[qe.HasIdCondition | qe.FieldCondition | qe.IsEmptyCondition]) -> qe.Filter:
        return qe.Filter(must=list(must))


def _selector(fields: list[str] | None) -> bool | qe.PayloadSelector:
    return True if fields is None else qe.PayloadSelector.Include(fields)


class EdgeIndex(QdrantIndex[EdgeOffset]):
    keeps_files = True

    """An embedded Qdrant Edge shard in `path`, created if absent, loaded otherwise.

    One process owns the folder: an flock on <path>/.lock is held until `close()` (Edge's
    own WAL lock is translated to IndexInUse as well). A write that returned is in Edge's
    write-ahead log, so it survives a crash of the process (it is replayed on the next load).
    The segment files are flushed to disk after writes at most every `flush_seconds` (0: after
    every write), and by `flush()`, `optimize()` and `close()`; a crash of the machine can lose
    the writes since the last flush, which `dreamer reindex --check` reports and `dreamer
    reindex` repairs. A deleted point stays in the segment files until a vacuum and in the
    write-ahead log until it rolls over: `erase` rebuilds the shard without it.

    Edge builds HNSW graphs only in `optimize()` (until then new points are searched by
    brute force). It runs automatically once `optimize_after` points were written since the
    last run (0 disables that); bulk loaders should pass 0 and call `optimize()` once at the end.
    """

    def __init__(
        self, path: Path, dim: int, *, optimize_after: int = 50_000, flush_seconds: float = FLUSH_SECONDS
    ) -> None:
        if dim <= 0:
            raise ConfigError(f"index dimension must be positive, got {dim}")
        self.path = Path(path)
        self.dim = dim
        self.optimize_after = optimize_after
        self.flush_seconds = flush_seconds
        self._pending = 0
        self._unflushed = 0
        self._flushed_at = time.monotonic()
        self._guard = threading.RLock()
        if self.path.exists() and not self.path.is_dir():
            raise ConfigError(
                f"the index folder {self.path} is a file: move it away (`dreamer reindex` rebuilds the index)"
            )
        private_dir(self.path)  # 0700: the index holds memory texts
        self._lock_fd: int | None = lock_folder(self.path)
        try:
            self._shard: qe.EdgeShard | None = self._open()
        except BaseException:
            self._release()
            raise

    # -- lifecycle

    def _open(self) -> qe.EdgeShard:
        shard, self.said = open_shard(self.path, self.dim)
        return shard

    def _release(self) -> None:
        if self._lock_fd is not None:
            unlock_folder(self._lock_fd)
            self._lock_fd = None

    def close(self) -> None:
        """Flush what changed, close the shard and release the folder lock. Safe to call twice."""
        with self._guard:
            if self._shard is not None:
                self.flush()
                with index_errors("close"):
                    self._shard.close()
                self._shard = None
            self._release()

    @property
    def shard(self) -> qe.EdgeShard:
        if self._shard is None:
            raise IndexFailure(f"index at {self.path} is closed")
        return self._shard

    # -- writes

    def upsert(self, points: list[IndexPoint]) -> None:
        super().upsert(points)
        if points:
            self._written(len(points))
            self._note_writes(len(points))

    def delete(self, memory_ids: list[str]) -> None:
        super().delete(memory_ids)
        if memory_ids:
            self._written(len(memory_ids))

    def _upsert_batch(self, points: Sequence[IndexPoint]) -> None:
        structs = [
            qe.Point(point_id(p.memory_id), point_vectors(p, self.said, _same), stored_payload(p)) for p in points
        ]
        self.shard.update(qe.UpdateOperation.upsert_points(structs))

    def _delete_batch(self, point_ids: list[str]) -> None:
        self.shard.update(qe.UpdateOperation.delete_points(list(point_ids)))

    def _written(self, n: int) -> None:
        """Count acknowledged writes and flush when `disk_flush_due` says so."""
        with self._guard:
            self._unflushed += n
            due = disk_flush_due(self._unflushed, time.monotonic() - self._flushed_at, self.flush_seconds)
        if due:
            self.flush()

    def flush(self) -> bool:
        """Write the segment files to disk if anything changed since the last flush."""
        with self._guard:
            if not self._unflushed:
                return False
            with index_errors("flush"):
                self.shard.flush()
            self._mark_flushed()
        return True

    def _mark_flushed(self) -> None:
        self._unflushed = 0
        self._flushed_at = time.monotonic()

    def _note_writes(self, n: int) -> None:
        with self._guard:
            self._pending += n
            due = self.optimize_after > 0 and self._pending >= self.optimize_after
        if due:
            self.optimize()

    def optimize(self) -> bool:
        """Build HNSW / merge segments now (blocking). True if anything was optimised."""
        with self._guard:
            started = time.perf_counter()
            with index_errors("optimize"):
                changed = self.shard.optimize()
                self.shard.flush()
            self._pending = 0
            self._mark_flushed()
        log.info("index optimize: changed=%s in %.1fs", changed, time.perf_counter() - started)
        return bool(changed)

    # -- reads

    def _search(self, search: Search) -> list[list[Hit]]:
        edge_filter = build_filter(EdgeTerms(), search.conds, search.memory_ids)
        selector = _selector(search.fields)
        requests = [
            qe.QueryRequest(
                limit=search.limit,
                query=qe.Query.Nearest(query, using=using),
                filter=edge_filter,
                with_payload=selector,
                with_vector=False,
            )
            for query, using in search.queries
        ]
        with index_errors("search"):
            found = self.shard.query_batch(qe.QueryBatchRequest(requests))
        return [[hit(p.payload, p.score) for p in points] for points in found]

    def _scroll(self, fields: list[str], offset: EdgeOffset | None) -> tuple[list[Payload | None], EdgeOffset | None]:
        selector = qe.PayloadSelector.Include(fields)
        request = qe.ScrollRequest(offset=offset, limit=SCROLL_PAGE, with_payload=selector, with_vector=False)
        records, offset = self.shard.scroll(request)
        return [r.payload for r in records], offset

    def count(self) -> int:
        with index_errors("count"):
            return int(self.shard.count(qe.CountRequest(exact=True)))

    def clear(self) -> None:
        """Drop every point by recreating the shard files (the folder lock stays held)."""
        with self._guard:
            self._close_shard("clear")
            self._empty_folder()
            self._reopen()
        log.info("cleared index at %s", self.path)

    def erase(self, memory_ids: list[str]) -> int:
        """Delete these memories' points and leave no copy of them in the folder.

        Edge's optimizer would vacuum the segments, but its write-ahead log keeps every write
        until it rolls over; so the shard is built anew beside the folder from the other points
        (vectors and payloads as stored, page by page: nothing is embedded again) and put in
        the old one's place. Returns how many points were kept."""
        gone = {point_id(m) for m in memory_ids}
        fresh = self.path.with_name(self.path.name + REWRITE_SUFFIX)
        with self._guard:
            shutil.rmtree(fresh, ignore_errors=True)  # a rewrite a crash cut short
            private_dir(fresh)
            with index_errors("rewrite"):
                kept = self._copy_into(fresh, gone)
            self._close_shard("rewrite")
            self._empty_folder()
            for child in fresh.iterdir():
                os.replace(child, self.path / child.name)
            fresh.rmdir()
            self._reopen()
        log.info("rewrote index at %s without %d memories: %d points kept", self.path, len(gone), kept)
        return kept

    def _copy_into(self, folder: Path, gone: set[str]) -> int:
        """Every point but `gone` into a new shard in `folder`; how many."""
        target = new_shard(folder, self.dim, self.said)
        kept, offset = 0, None
        try:
            while True:
                request = qe.ScrollRequest(offset=offset, limit=UPSERT_BATCH, with_payload=True, with_vector=True)
                records, offset = self.shard.scroll(request)
                points = [qe.Point(r.id, r.vector or {}, r.payload) for r in records if str(r.id) not in gone]
                if points:
                    target.update(qe.UpdateOperation.upsert_points(points))
                kept += len(points)
                if offset is None:
                    break
            target.flush()
        finally:
            target.close()
        return kept

    def _close_shard(self, what: str) -> None:
        shard = self.shard
        with index_errors(what):
            shard.close()
        self._shard = None

    def _empty_folder(self) -> None:
        """Remove the shard's files, the folder lock apart."""
        for child in self.path.iterdir():
            if child.name == LOCK_FILE:
                continue
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()

    def _reopen(self) -> None:
        self._shard = self._open()
        self._pending = 0
        self._mark_flushed()


def _same(sparse: qe.SparseVector) -> qe.SparseVector:
    """Edge takes its own sparse vectors as they are."""
    return sparse
