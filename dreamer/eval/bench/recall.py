"""The recall bench: recall() latency on Qdrant Edge against qdrant-client local mode."""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sqlalchemy.engine import Engine

from dreamer.core.models import new_memory_id, utcnow
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.embed.threads import set_embedder_threads
from dreamer.engine.runtime import Runtime
from dreamer.eval.bench.fixtures import BenchResult, fresh_store, local_embedder, percentiles, quiet_timings, sentence
from dreamer.index.contract import IndexPoint
from dreamer.index.edge import EdgeIndex
from dreamer.index.server import QdrantClientIndex
from dreamer.store import gate
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope


def bench_recall(settings: Settings, tmp: Path, sizes: Sequence[int], seed: int, queries: int = 60) -> BenchResult:
    """recall() p50/p95 at each size, the query embedded for real, on Qdrant Edge and then on
    qdrant-client local mode (the reference), each alone in the process with the same queries.
    The synthetic fill is moved out of the garbage collector's way first (`gc.freeze`), as a
    long-running server does after start-up, so timings are not full collections of bench data."""
    from dreamer.online.recall import recall

    threads = _serving_threads(settings)
    embedder = local_embedder(settings)
    rows: list[BenchResult] = []
    for n in sizes:
        st, engine = fresh_store(settings, tmp / f"n{n}")
        memories = synthetic_memories(engine, n, seed)
        texts = [
            sentence(random.Random(seed * 1000 + i)).replace("The user", "what does the user") for i in range(queries)
        ]
        for backend in ("edge", "qdrant-client-local"):
            index = _recall_index(backend, st, embedder.dim)
            try:
                started = time.perf_counter()
                fill_index(index, memories, embedder.dim, seed)
                fill = time.perf_counter() - started
                rt = Runtime.open(st, engine=engine, llm=None, embedder=embedder, index=index, busy=AlwaysIdle())
                samples = quiet_timings([partial(recall, rt, q, Scope(user_id="bench"), k=10) for q in texts])
            finally:
                index.close()
                gc.unfreeze()
            rows.append({"memories": n, "backend": backend, "fill_seconds": round(fill, 2), **percentiles(samples)})
        embed_only = quiet_timings([partial(embedder.embed, [q]) for q in texts])
        gc.unfreeze()
        rows.append({"memories": n, "backend": "query embedding alone", **percentiles(embed_only)})
        engine.dispose()
    ratios = {str(n): _ratio(rows, n) for n in sizes}
    return {
        "rows": rows,
        "reference_p95_over_edge_p95": ratios,
        "embedder_threads": threads,
        "embedder_runtime": embedder.runtime,
        "goal": "edge p95 <= 25 ms at the largest size",
    }


def _serving_threads(settings: Settings) -> int | None:
    """The threads `dreamer serve` gives the embedder, since recall is what a server does."""
    return set_embedder_threads(settings.serve_torch_threads)


def _ratio(rows: list[BenchResult], n: int) -> float:
    edge = next(r for r in rows if r["memories"] == n and r["backend"] == "edge")
    ref = next(r for r in rows if r["memories"] == n and r["backend"] == "qdrant-client-local")
    return round(float(ref["p95_ms"]) / max(float(edge["p95_ms"]), 1e-9), 2)


def _recall_index(backend: str, st: Settings, dim: int) -> EdgeIndex | QdrantClientIndex:
    if backend == "edge":
        return EdgeIndex(st.data_dir / "edge", dim)
    return QdrantClientIndex.local(st.data_dir / "qdrant-local", collection="bench", dim=dim)


def synthetic_memories(engine: Engine, n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    now = utcnow()
    rows: list[dict[str, Any]] = []
    for i in range(n):
        at = now - timedelta(minutes=i)
        text = sentence(rng)
        rows.append(
            dict(
                id=new_memory_id(),
                user_id="bench",
                kind="preference",
                text=text,
                content_hash=f"h{i}",
                status="candidate",
                source="dream",
                evidence=[],
                tags=[],
                importance=0.5,
                untrusted=False,
                valid_from=at,
                created_at=at,
                updated_at=at,
                last_seen=at,
                indexed_at=now,
            )
        )
    with session_scope(engine) as s:
        for start in range(0, n, 5_000):
            gate.insert_memories(s, rows[start : start + 5_000], [])
    return rows


def fill_index(index: EdgeIndex | QdrantClientIndex, memories: list[dict[str, Any]], dim: int, seed: int) -> None:
    """The index filled from synthetic unit vectors, each memory with one message vector as
    most rest on one message (the queries are embedded for real)."""
    rng = np.random.default_rng(seed)
    for start in range(0, len(memories), 2_000):
        batch = memories[start : start + 2_000]
        vectors = _unit_rows(rng, len(batch), dim)
        said = _unit_rows(rng, len(batch), dim)
        points = [
            IndexPoint(m["id"], m["text"], v.tolist(), _payload(m), said=[w.tolist()])
            for m, v, w in zip(batch, vectors, said)
        ]
        index.upsert(points)
    if isinstance(index, EdgeIndex):
        index.optimize()


def _unit_rows(rng: np.random.Generator, n: int, dim: int) -> NDArray[np.float32]:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    unit: NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return unit


def _payload(m: dict[str, Any]) -> dict[str, Any]:
    return {
        "memory_id": m["id"],
        "user_id": m["user_id"],
        "agent_id": None,
        "project": None,
        "team": None,
        "kind": m["kind"],
        "status": m["status"],
        "text": m["text"],
        "importance": m["importance"],
        "created_at": m["created_at"].timestamp(),
        "valid_from": m["valid_from"].timestamp(),
    }
