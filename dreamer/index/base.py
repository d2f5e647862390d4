"""The search index: memories as Qdrant points with a dense vector and a BM25 sparse vector,
and (from indexes built since it came) the vectors of the messages each rests on (`said`).

Two backends share one contract: `EdgeIndex` (embedded Qdrant Edge shard in a folder) and
`QdrantClientIndex` (a `qdrant_client.QdrantClient`, server or local mode). Sparse vectors
always come from Qdrant's own BM25 (`qdrant_edge.Bm25`), with the IDF modifier on the
collection, so both backends score text the same way. Every search is scoped to a user.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import shutil
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import qdrant_edge as qe

from dreamer.core.errors import ConfigError, DreamerError, IndexFailure, IndexInUse, ScopeRequired
from dreamer.core.scope import OWNER_FIELDS, Scope

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

log = logging.getLogger(__name__)

DENSE = "dense"
SPARSE = "bm25"
SAID = "said"  # the vectors of the messages a memory rests on, compared by MaxSim
KEYWORD_FIELDS = ("user_id", "agent_id", "project", "team", "kind", "status")
TIME_FIELD = "created_at"
NAMESPACE = uuid.UUID("5b0f3c4e-8d2a-5f61-9e7b-2c4d6a8e0f13")
LOCK_FILE = ".lock"
EDGE_CONFIG_FILE = "edge_config.json"
UPSERT_BATCH = 512
FLUSH_SECONDS = 5.0
SCROLL_PAGE = 10_000
DEFAULT_STATUSES = ("candidate", "verified", "review_required")


# --- the contract -----------------------------------------------------------------------


@dataclass
class IndexPoint:
    """One memory to index; `vector` None means sparse (BM25) only. BM25 reads `document` when
    given (the memory with its context, see `dreamer.documents`), else `text`."""

    memory_id: str
    text: str
    vector: list[float] | None
    payload: dict
    document: str | None = None
    said: Sequence[Sequence[float]] = ()  # the vectors of the messages it rests on (none: not searched by them)

    @property
    def sparse_text(self) -> str:
        return self.document or self.text


@dataclass
class Hit:
    memory_id: str
    score: float
    payload: dict


@dataclass
class SearchFilter:
    """Extra narrowing; `None` means any. `since` is inclusive, `until` exclusive (epoch s).

    `payload_fields` narrows what each hit carries: memory_id plus these payload fields (None:
    the whole payload). Reading payloads is a large part of a search's cost.

    `exact_scope` keeps only memories owned by exactly the scope: its None agent, project or
    team then means none, not any.
    """

    kinds: Sequence[str] | None = None
    statuses: Sequence[str] | None = DEFAULT_STATUSES
    since: float | None = None
    until: float | None = None
    payload_fields: Sequence[str] | None = None
    exact_scope: bool = False


@runtime_checkable
class MemoryIndex(Protocol):
    dim: int

    def upsert(self, points: list[IndexPoint]) -> None: ...

    def delete(self, memory_ids: list[str]) -> None: ...

    def search_dense(
        self, vector: list[float], scope: Scope, limit: int, flt: SearchFilter | None = None
    ) -> list[Hit]: ...

    def search_dense_many(
        self, vectors: Sequence[Sequence[float]], scope: Scope, limit: int, flt: SearchFilter | None = None
    ) -> list[list[Hit]]:
        """`search_dense` for each vector, in one request to the backend."""
        ...

    def search_text(self, query: str, scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]: ...

    def candidate_scores(
        self, vector: Sequence[float], scope: Scope, memory_ids: Sequence[str], flt: SearchFilter | None = None
    ) -> tuple[dict[str, float], dict[str, float]]:
        """For these memories (in scope and filter): the vector's similarity to each one's own
        vector, and to the nearest of the messages it rests on (only those that have them; none
        on an index built before `said`), in one request to the backend."""
        ...

    def all_ids(self) -> set[str]: ...

    def payloads(self, fields: Sequence[str]) -> dict[str, dict]: ...

    def count(self) -> int: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


def point_id(memory_id: str) -> str:
    """The Qdrant point id of a memory: deterministic, so upserts are idempotent."""
    return str(uuid.uuid5(NAMESPACE, memory_id))


# --- shared helpers -------------------------------------------------------------------------


@dataclass(frozen=True)
class _Cond:
    """A backend-neutral filter condition: exact value, any-of values, a float range, or empty
    (missing or null)."""

    key: str
    value: str | None = None
    values: tuple[str, ...] | None = None
    gte: float | None = None
    lt: float | None = None
    empty: bool = False


def require_scope(scope: Scope | None) -> Scope:
    """Refuse a search without a user scope."""
    if not isinstance(scope, Scope) or not scope.user_id:
        raise ScopeRequired("every index search needs a Scope with a user_id")
    return scope


def _conditions(scope: Scope, flt: SearchFilter | None) -> list[_Cond]:
    """The must-conditions of a search: the scope first, then the optional filter."""
    conds = [_Cond("user_id", value=scope.user_id)]
    for key in OWNER_FIELDS:
        value = getattr(scope, key)
        if value is not None:
            conds.append(_Cond(key, value=value))
        elif flt is not None and flt.exact_scope:
            conds.append(_Cond(key, empty=True))
    if flt is None:
        return conds
    if flt.kinds is not None:
        conds.append(_Cond("kind", values=tuple(flt.kinds)))
    if flt.statuses is not None:
        conds.append(_Cond("status", values=tuple(flt.statuses)))
    if flt.since is not None or flt.until is not None:
        conds.append(_Cond(TIME_FIELD, gte=flt.since, lt=flt.until))
    return conds


def hit_fields(flt: SearchFilter | None) -> list[str] | None:
    """The payload fields a search returns per hit; None means the whole payload."""
    if flt is None or flt.payload_fields is None:
        return None
    return list(dict.fromkeys(["memory_id", *flt.payload_fields]))


def _matches_nothing(flt: SearchFilter | None) -> bool:
    """An empty kinds or statuses list allows no memory at all."""
    if flt is None:
        return False
    return (flt.kinds is not None and len(flt.kinds) == 0) or (flt.statuses is not None and len(flt.statuses) == 0)


@lru_cache(maxsize=1)
def _bm25() -> qe.Bm25:
    """Qdrant's BM25 for English: lowercase, English stopwords, Snowball English stemmer."""
    config = qe.Bm25Config(
        language="english",
        lowercase=True,
        stopwords=qe.Language.English,
        stemmer=qe.SnowballParams(qe.SnowballLanguage.English),
    )
    return qe.Bm25(config)


def sparse_document(text: str) -> qe.SparseVector:
    """BM25 term-frequency weights of a memory text (IDF is applied by the index)."""
    return _bm25().embed_document(text)


def sparse_query(text: str) -> qe.SparseVector:
    """BM25 query vector: weight 1.0 per distinct term."""
    return _bm25().embed_query(text)


def _payload(point: IndexPoint) -> dict[str, Any]:
    """The stored payload: the caller's fields plus memory_id and text."""
    if not point.memory_id:
        raise IndexFailure("an index point needs a memory_id")
    payload = dict(point.payload)
    user_id = payload.get("user_id")
    if not isinstance(user_id, str) or not user_id:
        raise IndexFailure(f"memory {point.memory_id} has no user_id in its payload")
    created = payload.get(TIME_FIELD)
    if isinstance(created, datetime):
        payload[TIME_FIELD] = created.timestamp()
    payload["memory_id"] = point.memory_id
    payload["text"] = point.text
    return payload


def _asks_nothing(
    vectors: Sequence[Sequence[float]], dim: int, scope: Scope, limit: int, flt: SearchFilter | None
) -> bool:
    """Check a dense search's arguments (scope, vector lengths); True when it can match nothing."""
    require_scope(scope)
    for vector in vectors:
        _check_vector(vector, dim, "query vector")
    return limit <= 0 or _matches_nothing(flt) or not vectors


def floats(vector: Sequence[float]) -> list[float]:
    """A vector as a list of Python floats (a flat float numpy array converts in one call)."""
    dtype = getattr(vector, "dtype", None)
    if dtype is not None and dtype.kind == "f" and getattr(vector, "ndim", 0) == 1:
        return vector.tolist()  # type: ignore[attr-defined]
    return [float(x) for x in vector]


def _check_vector(vector: Sequence[float] | None, dim: int, what: str) -> None:
    if vector is not None and len(vector) != dim:
        raise ConfigError(f"{what} has {len(vector)} dimensions, the index expects {dim}")


def _hit(payload: dict[str, Any] | None, score: float) -> Hit:
    payload = payload or {}
    return Hit(memory_id=str(payload.get("memory_id", "")), score=float(score), payload=payload)


def _by_memory_id(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    rest = dict(payload)
    return str(rest.pop("memory_id")), rest


def _batches(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@contextmanager
def _index_errors(what: str) -> Iterator[None]:
    """Re-raise engine errors (untyped in Qdrant Edge) as IndexFailure, cause chained."""
    try:
        yield
    except DreamerError:
        raise
    except Exception as exc:  # engines raise plain Exception / transport errors
        raise IndexFailure(f"index {what} failed: {exc}") from exc


# --- embedded Qdrant Edge ---------------------------------------------------------------------


def _lock_folder(path: Path) -> int:
    """Take an exclusive advisory lock on <path>/.lock for the life of the index."""
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        os.close(fd)
        raise _in_use(path, holder) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
    return fd


def _unlock_folder(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _in_use(path: Path, holder: str = "") -> IndexInUse:
    who = f" (pid {holder})" if holder else ""
    return IndexInUse(
        f"index at {path} is in use by another process{who}; stop that process or give this one its own data_dir"
    )


def _edge_config(dim: int, said: bool = True) -> qe.EdgeConfig:
    """Vectors, graphs and payloads held in memory. Payloads default to memory-mapped files,
    whose pages the kernel may drop when idle: every search reads the payloads of its hits,
    and re-reading them from disk then costs more than the search itself. Segments built
    before this setting keep their payloads on disk until the optimizer rewrites them.
    `said`: the multivector of evidence messages (a shard built before it has none)."""
    vectors = {DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)}
    if said:
        vectors[SAID] = qe.EdgeVectorParams(
            size=dim,
            distance=qe.Distance.Cosine,  # only scored, never searched: no graph
            multivector_config=qe.MultiVectorConfig(qe.MultiVectorComparator.MaxSim),
            hnsw_config=qe.HnswIndexConfig(m=0, ef_construct=100, full_scan_threshold=10_000),
        )
    return qe.EdgeConfig(
        vectors=vectors,
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(m=16, ef_construct=100, full_scan_threshold=10_000),
        payload_memory=qe.Memory.Cached,
    )


def _stored_vectors(path: Path) -> dict:
    """The named vectors recorded in an existing shard's config ({} if unreadable)."""
    try:
        data = json.loads((path / EDGE_CONFIG_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        log.warning("cannot read %s: %s", path / EDGE_CONFIG_FILE, exc)
        return {}
    vectors = data.get("vectors") if isinstance(data, dict) else None
    return vectors if isinstance(vectors, dict) else {}


def _stored_dim(path: Path) -> int | None:
    """The dense dimension recorded in an existing shard's config, if readable."""
    size = (_stored_vectors(path).get(DENSE) or {}).get("size")
    return int(size) if isinstance(size, int) else None


def _dim_mismatch(path: Path, stored: int, dim: int) -> ConfigError:
    return ConfigError(
        f"index at {path} holds {stored}-dimensional vectors but the embedder gives {dim}; "
        "use the embedder the index was built with, or delete the index folder and reindex"
    )


def _open_error(exc: Exception, path: Path, dim: int) -> DreamerError:
    """Translate an Edge open failure: folder locked, incompatible config, anything else."""
    message = str(exc)
    if "WouldBlock" in message:
        return _in_use(path)
    if "ncompatible" in message:
        return ConfigError(
            f"index at {path} does not match the expected layout ({dim}-dimensional "
            f"{DENSE!r} + {SPARSE!r}): {message}; delete the index folder and reindex"
        )
    return IndexFailure(f"cannot open index at {path}: {message}")


def _edge_filter(conds: list[_Cond], memory_ids: Sequence[str] | None = None) -> qe.Filter:
    """The conditions as an Edge filter; with `memory_ids`, only those memories."""
    must: list[Any] = [] if memory_ids is None else [qe.HasIdCondition({point_id(m) for m in memory_ids})]
    for cond in conds:
        if cond.empty:
            must.append(qe.IsEmptyCondition(cond.key))
        elif cond.values is not None:
            must.append(qe.FieldCondition(cond.key, match=qe.MatchAny(list(cond.values))))
        elif cond.gte is not None or cond.lt is not None:
            must.append(qe.FieldCondition(cond.key, range=qe.RangeFloat(gte=cond.gte, lt=cond.lt)))
        else:
            must.append(qe.FieldCondition(cond.key, match=qe.MatchValue(cond.value)))
    return qe.Filter(must=must)


def disk_flush_due(unflushed: int, since_flush: float, every_seconds: float) -> bool:
    """Whether acknowledged writes should reach the segment files now: never when there are
    none, after every write when `every_seconds` is 0, else once that many seconds have passed."""
    return unflushed > 0 and since_flush >= every_seconds


def _payload_selector(fields: list[str] | None) -> Any:
    return True if fields is None else qe.PayloadSelector.Include(fields)


def _edge_point(point: IndexPoint, said: bool) -> qe.Point:
    vectors: dict[str, Any] = {SPARSE: sparse_document(point.sparse_text)}
    if point.vector is not None:
        vectors[DENSE] = floats(point.vector)
    if said and point.said:
        vectors[SAID] = [floats(v) for v in point.said]
    return qe.Point(point_id(point.memory_id), vectors, _payload(point))


def _check_point(point: IndexPoint, dim: int) -> None:
    _check_vector(point.vector, dim, f"vector of memory {point.memory_id}")
    for vector in point.said:
        _check_vector(vector, dim, f"message vector of memory {point.memory_id}")


class EdgeIndex:
    """An embedded Qdrant Edge shard in `path`, created if absent, loaded otherwise.

    One process owns the folder: an flock on <path>/.lock is held until `close()` (Edge's
    own WAL lock is translated to IndexInUse as well). A write that returned is in Edge's
    write-ahead log, so it survives a crash of the process (it is replayed on the next load).
    The segment files are flushed to disk after writes at most every `flush_seconds` (0: after
    every write), and by `flush()`, `optimize()` and `close()`; a crash of the machine can lose
    the writes since the last flush, which `dreamer reindex --check` reports and `dreamer
    reindex` repairs.

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
        self.path.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = _lock_folder(self.path)
        try:
            self._shard: qe.EdgeShard | None = self._open()
        except BaseException:
            self._release()
            raise

    def __enter__(self) -> EdgeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- lifecycle

    def _open(self) -> qe.EdgeShard:
        if (self.path / EDGE_CONFIG_FILE).exists():
            shard = self._load()
        else:
            shard = self._create()
        self._ensure_field_indexes(shard)
        return shard

    def _load(self) -> qe.EdgeShard:
        stored = _stored_dim(self.path)
        if stored is not None and stored != self.dim:
            raise _dim_mismatch(self.path, stored, self.dim)
        self.said = SAID in _stored_vectors(self.path)
        if not self.said:
            log.warning(
                "index at %s was built without message vectors: `dreamer reindex` rebuilds it with them", self.path
            )
        try:
            shard = qe.EdgeShard.load(str(self.path), _edge_config(self.dim, self.said))
        except Exception as exc:  # Edge raises plain Exception
            raise _open_error(exc, self.path, self.dim) from exc
        log.info("opened index at %s (%d dimensions)", self.path, self.dim)
        return shard

    def _create(self) -> qe.EdgeShard:
        self.said = True
        try:
            shard = qe.EdgeShard.create(str(self.path), _edge_config(self.dim))
        except Exception as exc:  # Edge raises plain Exception
            raise _open_error(exc, self.path, self.dim) from exc
        log.info("created index at %s (%d dimensions)", self.path, self.dim)
        return shard

    @staticmethod
    def _ensure_field_indexes(shard: qe.EdgeShard) -> None:
        """Keyword indexes for the scope/filter fields, a float index on created_at.

        Only user_id (the tenant) gets payload-aware HNSW links; the other fields have few
        distinct values, and extra graphs for them would slow optimize() for little gain.
        """
        existing = set(shard.info().payload_schema)
        wanted: dict[str, Any] = {key: qe.KeywordIndexParams(enable_hnsw=False) for key in KEYWORD_FIELDS}
        wanted["user_id"] = qe.KeywordIndexParams(is_tenant=True)
        wanted[TIME_FIELD] = qe.FloatIndexParams(enable_hnsw=False)
        missing = {key: schema for key, schema in wanted.items() if key not in existing}
        if not missing:
            return
        with _index_errors("payload index creation"):
            for key, schema in missing.items():
                shard.update(qe.UpdateOperation.create_field_index(key, schema))
            shard.flush()

    def _release(self) -> None:
        if self._lock_fd is not None:
            _unlock_folder(self._lock_fd)
            self._lock_fd = None

    def close(self) -> None:
        """Flush what changed, close the shard and release the folder lock. Safe to call twice."""
        with self._guard:
            if self._shard is not None:
                self.flush()
                with _index_errors("close"):
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
        if not points:
            return
        for point in points:
            _check_point(point, self.dim)
        shard = self.shard
        with _index_errors("upsert"):
            for batch in _batches(points, UPSERT_BATCH):
                shard.update(qe.UpdateOperation.upsert_points([_edge_point(p, self.said) for p in batch]))
        log.debug("indexed %d points", len(points))
        self._written(len(points))
        self._note_writes(len(points))

    def delete(self, memory_ids: list[str]) -> None:
        if not memory_ids:
            return
        shard = self.shard
        with _index_errors("delete"):
            for batch in _batches(memory_ids, UPSERT_BATCH):
                shard.update(qe.UpdateOperation.delete_points([point_id(m) for m in batch]))
        log.debug("removed %d points", len(memory_ids))
        self._written(len(memory_ids))

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
            with _index_errors("flush"):
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
            with _index_errors("optimize"):
                changed = self.shard.optimize()
                self.shard.flush()
            self._pending = 0
            self._mark_flushed()
        log.info("index optimize: changed=%s in %.1fs", changed, time.perf_counter() - started)
        return bool(changed)

    # -- reads

    def _query(self, query: Any, conds: list[_Cond], limit: int, fields: list[str] | None) -> list[Hit]:
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            filter=_edge_filter(conds),
            with_payload=_payload_selector(fields),
            with_vector=False,
        )
        with _index_errors("search"):
            found = self.shard.query(request)
        return [_hit(p.payload, p.score) for p in found]

    def search_dense(self, vector: list[float], scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        return self.search_dense_many([vector], scope, limit, flt)[0]  # a batch of one is no slower

    def search_dense_many(
        self, vectors: Sequence[Sequence[float]], scope: Scope, limit: int, flt: SearchFilter | None = None
    ) -> list[list[Hit]]:
        if _asks_nothing(vectors, self.dim, scope, limit, flt):
            return [[] for _ in vectors]
        edge_filter, selector = _edge_filter(_conditions(scope, flt)), _payload_selector(hit_fields(flt))
        requests = [
            qe.QueryRequest(
                limit=limit,
                query=qe.Query.Nearest(floats(v), using=DENSE),
                filter=edge_filter,
                with_payload=selector,
                with_vector=False,
            )
            for v in vectors
        ]
        with _index_errors("search"):
            found = self.shard.query_batch(qe.QueryBatchRequest(requests))
        return [[_hit(p.payload, p.score) for p in points] for points in found]

    def search_text(self, query: str, scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        require_scope(scope)
        sparse = sparse_query(query)
        if limit <= 0 or not sparse.indices or _matches_nothing(flt):
            return []
        nearest = qe.Query.Nearest(sparse, using=SPARSE)
        return self._query(nearest, _conditions(scope, flt), limit, hit_fields(flt))

    def candidate_scores(
        self, vector: Sequence[float], scope: Scope, memory_ids: Sequence[str], flt: SearchFilter | None = None
    ) -> tuple[dict[str, float], dict[str, float]]:
        if not memory_ids or _asks_nothing([vector], self.dim, scope, 1, flt):
            return {}, {}
        flt_ids = _edge_filter(_conditions(scope, flt), memory_ids)
        selector, query = _payload_selector(["memory_id"]), floats(vector)
        asks = [(query, DENSE)] + ([([query], SAID)] if self.said else [])
        requests = [
            qe.QueryRequest(
                limit=len(memory_ids),
                query=qe.Query.Nearest(q, using=using),
                filter=flt_ids,
                with_payload=selector,
                with_vector=False,
            )
            for q, using in asks
        ]
        with _index_errors("search"):
            found = self.shard.query_batch(qe.QueryBatchRequest(requests))
        scores = [{str(p.payload.get("memory_id", "")): float(p.score) for p in points} for points in found]
        return scores[0], (scores[1] if self.said else {})

    def all_ids(self) -> set[str]:
        return set(self.payloads(()))

    def payloads(self, fields: Sequence[str]) -> dict[str, dict]:
        """memory id -> the named payload fields, for every point (for drift checks)."""
        out: dict[str, dict] = {}
        offset: Any = None
        selector = qe.PayloadSelector.Include(["memory_id", *fields])
        while True:
            request = qe.ScrollRequest(offset=offset, limit=SCROLL_PAGE, with_payload=selector, with_vector=False)
            with _index_errors("scroll"):
                records, offset = self.shard.scroll(request)
            out.update(_by_memory_id(r.payload) for r in records if r.payload)
            if offset is None:
                return out

    def count(self) -> int:
        with _index_errors("count"):
            return int(self.shard.count(qe.CountRequest(exact=True)))

    def clear(self) -> None:
        """Drop every point by recreating the shard files (the folder lock stays held)."""
        with self._guard:
            shard = self.shard
            with _index_errors("clear"):
                shard.close()
            self._shard = None
            for child in self.path.iterdir():
                if child.name == LOCK_FILE:
                    continue
                if child.is_dir():
                    shutil.rmtree(child)
                else:
                    child.unlink()
            self._shard = self._open()
            self._pending = 0
            self._mark_flushed()
        log.info("cleared index at %s", self.path)


# --- qdrant-client (server or local mode) -------------------------------------------------------


def _client_filter(conds: list[_Cond], memory_ids: Sequence[str] | None = None) -> Any:
    """The conditions as a qdrant-client filter; with `memory_ids`, only those memories."""
    from qdrant_client import models

    must: list[Any] = [] if memory_ids is None else [models.HasIdCondition(has_id=[point_id(m) for m in memory_ids])]
    for cond in conds:
        if cond.empty:
            must.append(models.IsEmptyCondition(is_empty=models.PayloadField(key=cond.key)))
        elif cond.values is not None:
            match: Any = models.MatchAny(any=list(cond.values))
            must.append(models.FieldCondition(key=cond.key, match=match))
        elif cond.gte is not None or cond.lt is not None:
            rng = models.Range(gte=cond.gte, lt=cond.lt)
            must.append(models.FieldCondition(key=cond.key, range=rng))
        else:
            match = models.MatchValue(value=cond.value)
            must.append(models.FieldCondition(key=cond.key, match=match))
    return models.Filter(must=must)


def _client_payload(fields: list[str] | None) -> Any:
    return True if fields is None else fields


def _client_sparse(sparse: qe.SparseVector) -> Any:
    from qdrant_client import models

    return models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))


def _client_point(point: IndexPoint, said: bool) -> Any:
    from qdrant_client import models

    vectors: dict[str, Any] = {SPARSE: _client_sparse(sparse_document(point.sparse_text))}
    if point.vector is not None:
        vectors[DENSE] = floats(point.vector)
    if said and point.said:
        vectors[SAID] = [floats(v) for v in point.said]
    return models.PointStruct(id=point_id(point.memory_id), vector=vectors, payload=_payload(point))


class QdrantClientIndex:
    """A collection reached through `qdrant_client.QdrantClient`; the index owns the client."""

    def __init__(self, client: Any, *, collection: str, dim: int) -> None:
        if dim <= 0:
            raise ConfigError(f"index dimension must be positive, got {dim}")
        self.client = client
        self.collection = collection
        self.dim = dim
        self.said = True
        self._ensure_collection()

    @classmethod
    def local(cls, path: Path, *, collection: str, dim: int) -> QdrantClientIndex:
        """qdrant-client local mode in `path`; a folder held by another client -> IndexInUse."""
        from qdrant_client import QdrantClient

        try:
            client = QdrantClient(path=str(path))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise _in_use(Path(path)) from exc
            raise IndexFailure(f"cannot open local index at {path}: {exc}") from exc
        try:
            return cls(client, collection=collection, dim=dim)
        except BaseException:
            client.close()
            raise

    def __enter__(self) -> QdrantClientIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _ensure_collection(self) -> None:
        with _index_errors("collection check"):
            exists = self.client.collection_exists(self.collection)
        if exists:
            self._check_collection()
            return
        self._create_collection()

    def _check_collection(self) -> None:
        with _index_errors("collection check"):
            params = self.client.get_collection(self.collection).config.params
        vectors = params.vectors if isinstance(params.vectors, dict) else {}
        dense = vectors.get(DENSE)
        if dense is None or SPARSE not in (params.sparse_vectors or {}):
            raise ConfigError(
                f"collection {self.collection!r} exists but lacks the {DENSE!r}/{SPARSE!r} "
                "vectors; drop it or pick another DREAMER_QDRANT_COLLECTION"
            )
        if dense.size != self.dim:
            raise ConfigError(
                f"collection {self.collection!r} holds {dense.size}-dimensional vectors but the "
                f"embedder gives {self.dim}; use the embedder it was built with, "
                "or drop it and reindex"
            )
        self.said = SAID in vectors
        if not self.said:
            log.warning(
                "collection %s was built without message vectors: `dreamer reindex` rebuilds it with them",
                self.collection,
            )

    def _create_collection(self) -> None:
        from qdrant_client import models

        dense = models.VectorParams(size=self.dim, distance=models.Distance.COSINE)
        said = models.VectorParams(  # only scored, never searched: no graph
            size=self.dim,
            distance=models.Distance.COSINE,
            hnsw_config=models.HnswConfigDiff(m=0),
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
        )
        sparse = models.SparseVectorParams(modifier=models.Modifier.IDF)
        self.said = True
        with _index_errors("collection creation"):
            self.client.create_collection(
                self.collection,
                vectors_config={DENSE: dense, SAID: said},
                sparse_vectors_config={SPARSE: sparse},
                hnsw_config=models.HnswConfigDiff(m=16, ef_construct=100),
            )
            self._create_payload_indexes()
        log.info("created collection %s (%d dimensions)", self.collection, self.dim)

    def _create_payload_indexes(self) -> None:
        from qdrant_client import models

        schemas: dict[str, Any] = {key: models.PayloadSchemaType.KEYWORD for key in KEYWORD_FIELDS}
        schemas["user_id"] = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        schemas[TIME_FIELD] = models.PayloadSchemaType.FLOAT
        with warnings.catch_warnings():
            # local mode warns that it ignores payload indexes; a server uses them
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            for key, schema in schemas.items():
                self.client.create_payload_index(self.collection, key, field_schema=schema, wait=True)

    def close(self) -> None:
        with _index_errors("close"):
            self.client.close()

    def upsert(self, points: list[IndexPoint]) -> None:
        if not points:
            return
        for point in points:
            _check_point(point, self.dim)
        with _index_errors("upsert"):
            for batch in _batches(points, UPSERT_BATCH):
                structs = [_client_point(p, self.said) for p in batch]
                self.client.upsert(self.collection, points=structs, wait=True)
        log.debug("indexed %d points", len(points))

    def delete(self, memory_ids: list[str]) -> None:
        from qdrant_client import models

        if not memory_ids:
            return
        with _index_errors("delete"):
            for batch in _batches(memory_ids, UPSERT_BATCH):
                selector = models.PointIdsList(points=[point_id(m) for m in batch])
                self.client.delete(self.collection, points_selector=selector, wait=True)
        log.debug("removed %d points", len(memory_ids))

    def _query(self, query: Any, using: str, conds: list[_Cond], limit: int, fields: list[str] | None) -> list[Hit]:
        with _index_errors("search"):
            response = self.client.query_points(
                self.collection,
                query=query,
                using=using,
                query_filter=_client_filter(conds),
                limit=limit,
                with_payload=_client_payload(fields),
                with_vectors=False,
            )
        return [_hit(p.payload, p.score) for p in response.points]

    def search_dense(self, vector: list[float], scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        return self.search_dense_many([vector], scope, limit, flt)[0]

    def search_dense_many(
        self, vectors: Sequence[Sequence[float]], scope: Scope, limit: int, flt: SearchFilter | None = None
    ) -> list[list[Hit]]:
        from qdrant_client import models

        if _asks_nothing(vectors, self.dim, scope, limit, flt):
            return [[] for _ in vectors]
        query_filter, fields = _client_filter(_conditions(scope, flt)), hit_fields(flt)
        requests = [
            models.QueryRequest(
                query=floats(v),
                using=DENSE,
                filter=query_filter,
                limit=limit,
                with_payload=_client_payload(fields),
                with_vector=False,
            )
            for v in vectors
        ]
        with _index_errors("search"):
            responses = self.client.query_batch_points(self.collection, requests=requests)
        return [[_hit(p.payload, p.score) for p in r.points] for r in responses]

    def candidate_scores(
        self, vector: Sequence[float], scope: Scope, memory_ids: Sequence[str], flt: SearchFilter | None = None
    ) -> tuple[dict[str, float], dict[str, float]]:
        from qdrant_client import models

        if not memory_ids or _asks_nothing([vector], self.dim, scope, 1, flt):
            return {}, {}
        query_filter, query = _client_filter(_conditions(scope, flt), memory_ids), floats(vector)
        asks = [(query, DENSE)] + ([([query], SAID)] if self.said else [])
        requests = [
            models.QueryRequest(
                query=q,
                using=using,
                filter=query_filter,
                limit=len(memory_ids),
                with_payload=["memory_id"],
                with_vector=False,
            )
            for q, using in asks
        ]
        with _index_errors("search"):
            responses = self.client.query_batch_points(self.collection, requests=requests)
        scores = [{str((p.payload or {}).get("memory_id", "")): float(p.score) for p in r.points} for r in responses]
        return scores[0], (scores[1] if self.said else {})

    def search_text(self, query: str, scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        require_scope(scope)
        sparse = sparse_query(query)
        if limit <= 0 or not sparse.indices or _matches_nothing(flt):
            return []
        conds = _conditions(scope, flt)
        return self._query(_client_sparse(sparse), SPARSE, conds, limit, hit_fields(flt))

    def all_ids(self) -> set[str]:
        return set(self.payloads(()))

    def payloads(self, fields: Sequence[str]) -> dict[str, dict]:
        """memory id -> the named payload fields, for every point (for drift checks)."""
        out: dict[str, dict] = {}
        offset: Any = None
        while True:
            with _index_errors("scroll"):
                records, offset = self.client.scroll(
                    self.collection,
                    limit=SCROLL_PAGE,
                    offset=offset,
                    with_payload=["memory_id", *fields],
                    with_vectors=False,
                )
            out.update(_by_memory_id(r.payload) for r in records if r.payload)
            if offset is None:
                return out

    def count(self) -> int:
        with _index_errors("count"):
            return int(self.client.count(self.collection, exact=True).count)

    def clear(self) -> None:
        """Drop and recreate the collection."""
        with _index_errors("clear"):
            self.client.delete_collection(self.collection)
        self._create_collection()
        log.info("cleared collection %s", self.collection)


# --- factory ---------------------------------------------------------------------------------


def build_index(settings: Settings, dim: int, *, client: Any = None) -> MemoryIndex:
    """Qdrant Edge in settings.index_dir when no qdrant_url is set, else a Qdrant server.

    A `client` handed in (e.g. local mode `QdrantClient(path=...)`) is used as is.
    """
    if client is not None:
        return QdrantClientIndex(client, collection=settings.qdrant_collection, dim=dim)
    if not settings.qdrant_url:
        return EdgeIndex(settings.index_dir, dim, flush_seconds=settings.index_flush_seconds)
    from qdrant_client import QdrantClient

    with _index_errors("connect"):
        server = QdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None)
    return QdrantClientIndex(server, collection=settings.qdrant_collection, dim=dim)
