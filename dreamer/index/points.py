"""What an upsert stores: the checked vectors and the payload of one memory's point, the same
for both backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TypeVar

import qdrant_edge as qe

from dreamer.core.errors import ConfigError, IndexFailure
from dreamer.index.bm25 import sparse_document
from dreamer.index.contract import DENSE, SAID, SPARSE, TIME_FIELD, IndexPoint, Payload

S = TypeVar("S")


def floats(vector: Sequence[float]) -> list[float]:
    """A vector as a list of Python floats (a flat float numpy array converts in one call)."""
    dtype = getattr(vector, "dtype", None)
    if dtype is not None and dtype.kind == "f" and getattr(vector, "ndim", 0) == 1:
        converted: list[float] = vector.tolist()  # type: ignore[attr-defined]
        return converted
    return [float(x) for x in vector]


def check_vector(vector: Sequence[float] | None, dim: int, what: str) -> None:
    """Refuse a vector whose length is not the index's dimension."""
    if vector is not None and len(vector) != dim:
        raise ConfigError(f"{what} has {len(vector)} dimensions, the index expects {dim}")


def check_point(point: IndexPoint, dim: int) -> None:
    """Refuse a point whose own or message vectors do not fit the index."""
    check_vector(point.vector, dim, f"vector of memory {point.memory_id}")
    for vector in point.said:
        check_vector(vector, dim, f"message vector of memory {point.memory_id}")


def stored_payload(point: IndexPoint) -> Payload:
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


def point_vectors(
    point: IndexPoint, said: bool, sparse: Callable[[qe.SparseVector], S]
) -> dict[str, S | list[float] | list[list[float]]]:
    """The named vectors of a point: BM25 (in the backend's sparse type, via `sparse`), the dense
    vector if any, and the message vectors when the index keeps them."""
    vectors: dict[str, S | list[float] | list[list[float]]] = {SPARSE: sparse(sparse_document(point.sparse_text))}
    if point.vector is not None:
        vectors[DENSE] = floats(point.vector)
    if said and point.said:
        vectors[SAID] = [floats(v) for v in point.said]
    return vectors
