"""The `MemoryIndex` contract written once over a Qdrant engine: a backend supplies four
primitives (run a batch of searches, read a page of payloads, write and delete a batch of
points) in its own client's types, and inherits every search, write and scan from here."""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, Self, TypeVar

import qdrant_edge as qe

from dreamer.core.errors import DreamerError, IndexFailure
from dreamer.core.scope import Scope
from dreamer.index.bm25 import sparse_query
from dreamer.index.contract import (
    DENSE,
    SAID,
    SPARSE,
    UPSERT_BATCH,
    Hit,
    IndexPoint,
    Payload,
    SearchFilter,
    point_id,
    require_scope,
)
from dreamer.index.points import check_point, check_vector, floats
from dreamer.index.query import Condition, conditions, hit_fields, matches_nothing

log = logging.getLogger(__name__)

Query = list[float] | list[list[float]] | qe.SparseVector
T = TypeVar("T")
OffsetT = TypeVar("OffsetT")  # a backend's scroll offset


@dataclass(frozen=True)
class Search:
    """Searches that share one filter, limit and payload selection, sent as one batch."""

    queries: list[tuple[Query, str]]  # (query, name of the vector it searches)
    conds: list[Condition]
    limit: int
    fields: list[str] | None  # the payload each hit carries; None: all of it
    memory_ids: Sequence[str] | None = None  # only these memories


def hit(payload: Payload | None, score: float) -> Hit:
    """A backend's scored point as a Hit."""
    payload = payload or {}
    return Hit(memory_id=str(payload.get("memory_id", "")), score=float(score), payload=payload)


def batches(items: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    """`items` in slices of at most `size`."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@contextmanager
def index_errors(what: str) -> Iterator[None]:
    """Re-raise engine errors (untyped in Qdrant Edge) as IndexFailure, cause chained."""
    try:
        yield
    except DreamerError:
        raise
    except Exception as exc:  # engines raise plain Exception / transport errors
        raise IndexFailure(f"index {what} failed: {exc}") from exc


class QdrantIndex(ABC, Generic[OffsetT]):
    """A memory index on a Qdrant engine; `said`: whether it keeps the message vectors;
    `keeps_files`: whether its points are in files of its own (see `erase`)."""

    dim: int
    said: bool
    keeps_files: bool

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def close(self) -> None:
        """Release the engine (and whatever the index holds for it)."""

    @abstractmethod
    def _search(self, search: Search) -> list[list[Hit]]:
        """Run the batch: the hits of each query, in order."""

    @abstractmethod
    def _scroll(self, fields: list[str], offset: OffsetT | None) -> tuple[list[Payload | None], OffsetT | None]:
        """One page of payloads (these fields) from `offset`, and the offset of the next page."""

    @abstractmethod
    def _upsert_batch(self, points: Sequence[IndexPoint]) -> None:
        """Write these (checked) points."""

    @abstractmethod
    def _delete_batch(self, point_ids: list[str]) -> None:
        """Delete these points."""

    @abstractmethod
    def erase(self, memory_ids: list[str]) -> int | None:
        """Delete these points and leave no copy of them in the index's files (`MemoryIndex.erase`)."""

    def upsert(self, points: list[IndexPoint]) -> None:
        if not points:
            return
        for point in points:
            check_point(point, self.dim)
        with index_errors("upsert"):
            for batch in batches(points, UPSERT_BATCH):
                self._upsert_batch(batch)
        log.debug("indexed %d points", len(points))

    def delete(self, memory_ids: list[str]) -> None:
        if not memory_ids:
            return
        with index_errors("delete"):
            for batch in batches(memory_ids, UPSERT_BATCH):
                self._delete_batch([point_id(m) for m in batch])
        log.debug("removed %d points", len(memory_ids))

    def _asks_nothing(
        self, vectors: Sequence[Sequence[float]], scope: Scope, limit: int, flt: SearchFilter | None
    ) -> bool:
        """Check a dense search's arguments (scope, vector lengths); True when it can match nothing."""
        require_scope(scope)
        for vector in vectors:
            check_vector(vector, self.dim, "query vector")
        return limit <= 0 or matches_nothing(flt) or not vectors

    def search_dense(self, vector: list[float], scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        return self.search_dense_many([vector], scope, limit, flt)[0]  # a batch of one is no slower

    def search_dense_many(
        self, vectors: Sequence[Sequence[float]], scope: Scope, limit: int, flt: SearchFilter | None = None
    ) -> list[list[Hit]]:
        if self._asks_nothing(vectors, scope, limit, flt):
            return [[] for _ in vectors]
        queries: list[tuple[Query, str]] = [(floats(v), DENSE) for v in vectors]
        return self._search(Search(queries, conditions(scope, flt), limit, hit_fields(flt)))

    def search_text(self, query: str, scope: Scope, limit: int, flt: SearchFilter | None = None) -> list[Hit]:
        require_scope(scope)
        sparse = sparse_query(query)
        if limit <= 0 or not sparse.indices or matches_nothing(flt):
            return []
        return self._search(Search([(sparse, SPARSE)], conditions(scope, flt), limit, hit_fields(flt)))[0]

    def candidate_scores(
        self, vector: Sequence[float], scope: Scope, memory_ids: Sequence[str], flt: SearchFilter | None = None
    ) -> tuple[dict[str, float], dict[str, float]]:
        if not memory_ids or self._asks_nothing([vector], scope, 1, flt):
            return {}, {}
        query = floats(vector)
        queries: list[tuple[Query, str]] = [(query, DENSE)] + ([([query], SAID)] if self.said else [])
        search = Search(queries, conditions(scope, flt), len(memory_ids), ["memory_id"], memory_ids)
        scores = [{h.memory_id: h.score for h in hits} for hits in self._search(search)]
        return scores[0], (scores[1] if self.said else {})

    def all_ids(self) -> set[str]:
        return set(self.payloads(()))

    def payloads(self, fields: Sequence[str]) -> dict[str, Payload]:
        """memory id -> the named payload fields, for every point (for drift checks)."""
        out: dict[str, Payload] = {}
        offset: OffsetT | None = None
        while True:
            with index_errors("scroll"):
                page, offset = self._scroll(["memory_id", *fields], offset)
            for payload in filter(None, page):
                rest = dict(payload)
                out[str(rest.pop("memory_id"))] = rest
            if offset is None:
                return out
