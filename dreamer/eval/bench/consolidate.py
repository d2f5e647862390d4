"""The consolidation bench: candidates consolidated per second against the embedder's own rate."""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Sequence
from pathlib import Path

from sqlmodel import select

from dreamer.core.models import Memory
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.embed.embedders import CachedEmbedder, Embedder
from dreamer.engine import outbox
from dreamer.engine.consolidation.apply import apply_all
from dreamer.engine.consolidation.plan import plan_candidates
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.runtime import Runtime, settle
from dreamer.eval.bench.fixtures import BenchResult, fresh_store, local_embedder, sentence
from dreamer.index.edge import EdgeIndex
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope


def bench_consolidate(
    settings: Settings, tmp: Path, sizes: Sequence[int], seed: int, batch: int = 16, users: int = 20
) -> BenchResult:
    """Candidates consolidated per second (embed, neighbours, decide, apply, index, Markdown) against
    the embedder's own sentences per second on the same texts in the same batches, the model warmed
    up on a batch of that size first, and the start-up heap settled as the daemon and workers
    settle theirs (`runtime.settle`). The two are timed batch by batch, interleaved, so machine
    noise hits both alike. Run on the bare Edge index and on the documented one a `Runtime` opens
    (which reads each memory's evidence context from SQL when it indexes it)."""
    raw = local_embedder(settings)
    rows = []
    for n in sizes:
        for documented in (False, True):
            rows.append(
                _consolidate_run(settings, tmp / f"n{n}-{int(documented)}", raw, n, seed, batch, users, documented)
            )
    return {"rows": rows, "goal": "ratio >= 0.8 (the documented index is what production runs)"}


def _consolidate_run(
    settings: Settings, folder: Path, raw: Embedder, n: int, seed: int, batch: int, users: int, documented: bool
) -> BenchResult:
    rng = random.Random(seed)
    texts = [f"{sentence(rng)[:-1]} ({i})." for i in range(n)]
    raw.embed([f"{sentence(rng)[:-1]} ({i})." for i in range(batch)])
    st, engine = fresh_store(settings, folder)
    edge = EdgeIndex(st.index_dir, raw.dim)
    embedder = CachedEmbedder(raw)
    index = DocumentedIndex.from_settings(edge, engine, st, embedder) if documented else edge
    rt = Runtime.open(st, engine=engine, llm=None, embedder=embedder, index=index, busy=AlwaysIdle())
    settle(rt)  # as the daemon and workers do at start-up
    embed_s = consolidate_s = 0.0
    for i, start in enumerate(range(0, n, batch)):
        started = time.perf_counter()
        raw.embed(texts[start : start + batch])
        embed_s += time.perf_counter() - started
        started = time.perf_counter()
        _consolidate_batch(rt, Scope(user_id=f"u{i % users}"), texts[start : start + batch])
        consolidate_s += time.perf_counter() - started
    started = time.perf_counter()
    outbox.render_due(rt)  # as at the end of a pass
    consolidate_s += time.perf_counter() - started
    with session_scope(engine) as s:
        stored = len(s.exec(select(Memory.id)).all())
    rt.close()
    edge.close()
    engine.dispose()
    gc.unfreeze()
    return {
        "candidates": n,
        "index": "documented edge" if documented else "edge",
        "batch": batch,
        "users": users,
        "stored": stored,
        "embedder_sentences_per_s": round(n / embed_s, 1),
        "consolidated_per_s": round(n / consolidate_s, 1),
        "ratio": round(embed_s / consolidate_s, 3),
    }


def _consolidate_batch(rt: Runtime, scope: Scope, texts: list[str]) -> None:
    """One session's worth of candidates, under the user's consolidation lock as in a pass:
    planned against the scope, applied, indexed."""
    cands = [Candidate(kind="preference", text=t, seqs=[1], importance=0.5) for t in texts]
    with rt.user_locks.hold(scope.user_id) as lock:
        planned = plan_candidates(rt, scope, scope.user_id, cands, None, exact=True)
        lock.confirm()
        with session_scope(rt.engine) as s:
            apply_all(s, planned, scope, source="dream", evidence=[[{"session_id": None, "seqs": [1]}]] * len(planned))
        outbox.drain(rt, render=False)  # as a pass does after each session; the views are rendered at its end
