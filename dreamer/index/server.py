"""`QdrantClientIndex`: the memory index as a collection reached through
`qdrant_client.QdrantClient` (a server, or local mode in a folder), translating the shared
searches and writes into qdrant-client's models."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import qdrant_edge as qe
from qdrant_client import QdrantClient, models
from qdrant_client.conversions.common_types import PointId

from dreamer.core.errors import ConfigError, IndexFailure
from dreamer.index.contract import (
    DENSE,
    KEYWORD_FIELDS,
    SAID,
    SCROLL_PAGE,
    SPARSE,
    TIME_FIELD,
    UPSERT_BATCH,
    Hit,
    IndexPoint,
    Payload,
    folder_in_use,
    point_id,
)
from dreamer.index.points import point_vectors, stored_payload
from dreamer.index.qdrant import QdrantIndex, Query, Search, batches, hit, index_errors
from dreamer.index.query import build_filter

log = logging.getLogger(__name__)

ClientCondition = models.HasIdCondition | models.FieldCondition | models.IsEmptyCondition


class ClientTerms:
    """Filter conditions as qdrant-client models."""

    def has_id(self, point_ids: list[str]) -> models.HasIdCondition:
        return models.HasIdCondition(has_id=list(point_ids))

    def equals(self, key: str, value: str) -> models.FieldCondition:
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))

    def any_of(self, key: str, values: list[str]) -> models.FieldCondition:
        return models.FieldCondition(key=key, match=models.MatchAny(any=values))

    def in_range(self, key: str, gte: float | None, lt: float | None) -> models.FieldCondition:
        return models.FieldCondition(key=key, range=models.Range(gte=gte, lt=lt))

    def is_empty(self, key: str) -> models.IsEmptyCondition:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=key))

    def all_of(self, must: list[ClientCondition]) -> models.Filter:
        return models.Filter(must=list(must))


def _local_on_disk(client: QdrantClient) -> bool:
    """Whether the client is local mode in a folder (not in memory, not a server)."""
    from qdrant_client.local.qdrant_local import QdrantLocal

    inner = getattr(client, "_client", None)
    return isinstance(inner, QdrantLocal) and bool(inner.persistent)


def _as_written(record: models.Record) -> models.PointStruct:
    """A point read back with its vectors, as it is written again."""
    vectors: dict[str, models.Vector] = dict(record.vector) if isinstance(record.vector, dict) else {}
    return models.PointStruct(id=record.id, vector=vectors, payload=record.payload)


def client_sparse(sparse: qe.SparseVector) -> models.SparseVector:
    """An Edge BM25 vector as a qdrant-client sparse vector."""
    return models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))


def _client_query(query: Query) -> list[float] | list[list[float]] | models.SparseVector:
    return client_sparse(query) if isinstance(query, qe.SparseVector) else query


class QdrantClientIndex(QdrantIndex[PointId]):
    """A collection reached through `qdrant_client.QdrantClient`; the index owns the client.

    In local mode on disk (`QdrantClient(path=...)`) the points are pickled into a SQLite file
    of the folder, which keeps a deleted row's bytes in its free pages: `erase` writes the
    collection anew. A server's files are its operator's: there `erase` only deletes."""

    def __init__(self, client: QdrantClient, *, collection: str, dim: int) -> None:
        if dim <= 0:
            raise ConfigError(f"index dimension must be positive, got {dim}")
        self.client = client
        self.collection = collection
        self.dim = dim
        self.said = True
        self.keeps_files = _local_on_disk(client)
        self._ensure_collection()

    @classmethod
    def local(cls, path: Path, *, collection: str, dim: int) -> QdrantClientIndex:
        """qdrant-client local mode in `path`; a folder held by another client -> IndexInUse."""
        try:
            client = QdrantClient(path=str(path))
        except RuntimeError as exc:
            if "already accessed" in str(exc):
                raise folder_in_use(Path(path)) from exc
            raise IndexFailure(f"cannot open local index at {path}: {exc}") from exc
        try:
            return cls(client, collection=collection, dim=dim)
        except BaseException:
            client.close()
            raise

    def _ensure_collection(self) -> None:
        with index_errors("collection check"):
            exists = self.client.collection_exists(self.collection)
        if exists:
            self._check_collection()
            return
        self._create_collection()

    def _check_collection(self) -> None:
        with index_errors("collection check"):
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
        dense = models.VectorParams(size=self.dim, distance=models.Distance.COSINE)
        said = models.VectorParams(  # only scored, never searched: no graph
            size=self.dim,
            distance=models.Distance.COSINE,
            hnsw_config=models.HnswConfigDiff(m=0),
            multivector_config=models.MultiVectorConfig(comparator=models.MultiVectorComparator.MAX_SIM),
        )
        sparse = models.SparseVectorParams(modifier=models.Modifier.IDF)
        self.said = True
        with index_errors("collection creation"):
            self.client.create_collection(
                self.collection,
                vectors_config={DENSE: dense, SAID: said},
                sparse_vectors_config={SPARSE: sparse},
                hnsw_config=models.HnswConfigDiff(m=16, ef_construct=100),
            )
            self._create_payload_indexes()
        log.info("created collection %s (%d dimensions)", self.collection, self.dim)

    def _create_payload_indexes(self) -> None:
        schemas: dict[str, models.PayloadSchemaType | models.KeywordIndexParams] = {
            key: models.PayloadSchemaType.KEYWORD for key in KEYWORD_FIELDS
        }
        schemas["user_id"] = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
        schemas[TIME_FIELD] = models.PayloadSchemaType.FLOAT
        with warnings.catch_warnings():
            # local mode warns that it ignores payload indexes; a server uses them
            warnings.filterwarnings("ignore", message="Payload indexes have no effect", category=UserWarning)
            for key, schema in schemas.items():
                self.client.create_payload_index(self.collection, key, field_schema=schema, wait=True)

    def close(self) -> None:
        with index_errors("close"):
            self.client.close()

    def _upsert_batch(self, points: Sequence[IndexPoint]) -> None:
        self.client.upsert(self.collection, points=[self._struct(p) for p in points], wait=True)

    def _struct(self, point: IndexPoint) -> models.PointStruct:
        vectors: dict[str, models.Vector] = {**point_vectors(point, self.said, client_sparse)}
        return models.PointStruct(id=point_id(point.memory_id), vector=vectors, payload=stored_payload(point))

    def _delete_batch(self, point_ids: list[str]) -> None:
        selector = models.PointIdsList(points=list(point_ids))
        self.client.delete(self.collection, points_selector=selector, wait=True)

    def erase(self, memory_ids: list[str]) -> int | None:
        if not self.keeps_files:
            self.delete(memory_ids)
            return None
        gone = {point_id(m) for m in memory_ids}
        with index_errors("rewrite"):
            kept = self._points_except(gone)  # local mode holds them all in memory anyway
            self.client.delete_collection(self.collection)  # its folder goes, SQLite file and all
        self._create_collection()
        with index_errors("rewrite"):
            for batch in batches(kept, UPSERT_BATCH):
                self.client.upsert(self.collection, points=list(batch), wait=True)
        log.info("rewrote collection %s without %d memories: %d points kept", self.collection, len(gone), len(kept))
        return len(kept)

    def _points_except(self, gone: set[str]) -> list[models.PointStruct]:
        kept: list[models.PointStruct] = []
        offset: PointId | None = None
        while True:
            records, offset = self.client.scroll(
                self.collection, limit=UPSERT_BATCH, offset=offset, with_payload=True, with_vectors=True
            )
            kept += [_as_written(r) for r in records if str(r.id) not in gone]
            if offset is None:
                return kept

    def _search(self, search: Search) -> list[list[Hit]]:
        query_filter = build_filter(ClientTerms(), search.conds, search.memory_ids)
        with_payload: bool | list[str] = True if search.fields is None else search.fields
        requests = [
            models.QueryRequest(
                query=_client_query(query),
                using=using,
                filter=query_filter,
                limit=search.limit,
                with_payload=with_payload,
                with_vector=False,
            )
            for query, using in search.queries
        ]
        with index_errors("search"):
            responses = self.client.query_batch_points(self.collection, requests=requests)
        return [[hit(p.payload, p.score) for p in r.points] for r in responses]

    def _scroll(self, fields: list[str], offset: PointId | None) -> tuple[list[Payload | None], PointId | None]:
        records, offset = self.client.scroll(
            self.collection, limit=SCROLL_PAGE, offset=offset, with_payload=fields, with_vectors=False
        )
        return [r.payload for r in records], offset

    def count(self) -> int:
        with index_errors("count"):
            return int(self.client.count(self.collection, exact=True).count)

    def clear(self) -> None:
        """Drop and recreate the collection."""
        with index_errors("clear"):
            self.client.delete_collection(self.collection)
        self._create_collection()
        log.info("cleared collection %s", self.collection)
