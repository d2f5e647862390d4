"""What every search index offers: the `MemoryIndex` protocol, the points it stores, the hits it
returns, the filters it takes, and the names and limits both backends share.

Memories are Qdrant points with a dense vector, a BM25 sparse vector and (from indexes built
since it came) the vectors of the messages each rests on (`said`). Every search is scoped to a
user.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from dreamer.core.errors import IndexInUse, ScopeRequired
from dreamer.core.scope import Scope

DENSE = "dense"
SPARSE = "bm25"
SAID = "said"  # the vectors of the messages a memory rests on, compared by MaxSim
KEYWORD_FIELDS = ("user_id", "agent_id", "project", "team", "kind", "status")
TIME_FIELD = "created_at"
NAMESPACE = uuid.UUID("5b0f3c4e-8d2a-5f61-9e7b-2c4d6a8e0f13")
UPSERT_BATCH = 512
SCROLL_PAGE = 10_000
DEFAULT_STATUSES = ("candidate", "verified", "review_required")

Payload = dict[str, Any]  # a point's JSON payload, as the Qdrant libraries type it


@dataclass
class IndexPoint:
    """One memory to index; `vector` None means sparse (BM25) only. BM25 reads `document` when
    given (the memory with its context, see `dreamer.engine.documents`), else `text`."""

    memory_id: str
    text: str
    vector: list[float] | None
    payload: Payload
    document: str | None = None
    said: Sequence[Sequence[float]] = ()  # the vectors of the messages it rests on (none: not searched by them)

    @property
    def sparse_text(self) -> str:
        return self.document or self.text


@dataclass
class Hit:
    """One memory a search found, with its score and (part of) its payload."""

    memory_id: str
    score: float
    payload: Payload


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
    """The search index as the rest of dreamer uses it, whichever backend holds it."""

    dim: int
    keeps_files: bool  # its points are in files of its own (embedded, local mode), not a server's

    def upsert(self, points: list[IndexPoint]) -> None: ...

    def delete(self, memory_ids: list[str]) -> None: ...

    def erase(self, memory_ids: list[str]) -> int | None:
        """Delete these memories' points and, in an index that `keeps_files`, rewrite those files
        from the other points so that no copy of the erased ones is left in them: how many points
        were kept. A server's files are its operator's: there the points are only deleted (None)."""
        ...

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

    def payloads(self, fields: Sequence[str]) -> dict[str, Payload]: ...

    def count(self) -> int: ...

    def clear(self) -> None: ...

    def close(self) -> None: ...


def point_id(memory_id: str) -> str:
    """The Qdrant point id of a memory: deterministic, so upserts are idempotent."""
    return str(uuid.uuid5(NAMESPACE, memory_id))


def require_scope(scope: Scope | None) -> Scope:
    """Refuse a search without a user scope."""
    if not isinstance(scope, Scope) or not scope.user_id:
        raise ScopeRequired("every index search needs a Scope with a user_id")
    return scope


def folder_in_use(path: Path, holder: str = "") -> IndexInUse:
    """The error for an index folder another process holds (`holder`: its pid, if known)."""
    who = f" (pid {holder})" if holder else ""
    return IndexInUse(
        f"index at {path} is in use by another process{who}; stop that process or give this one its own data_dir"
    )
