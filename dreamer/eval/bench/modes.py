"""The memory-modes bench: recall p95 with builtin memory alone, and in `both` mode beside a
healthy and beside a dead mem0 provider (the real mem0ai, its embeddings from the scripted
server), on the same store, index and queries. Each query is recalled in builtin and in both in turn.
A dead provider costs recall only the calls that wait for its deadline until the breaker opens;
after that it is refused at once."""

from __future__ import annotations

import gc
import random
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.eval.bench.fixtures import BenchResult, fresh_store, local_embedder, percentiles, quiet_timings, sentence
from dreamer.eval.bench.recall import fill_index, synthetic_memories
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.providers.contract import Turn
from dreamer.providers.guard import open_guard
from dreamer.store.busy import AlwaysIdle

SYNCED = 200  # turns the healthy provider holds


def bench_modes(settings: Settings, tmp: Path, sizes: Sequence[int], seed: int, queries: int = 60) -> BenchResult:
    """p50/p95 of recall in builtin, both with a healthy provider, and both with a dead one."""
    embedder = local_embedder(settings)
    rows: list[BenchResult] = []
    scope = Scope(user_id="bench")
    for n in sizes:
        with ScriptedServer(embed_dim=embedder.dim) as server:
            overrides = {"llm_base_url": server.url, "embed_dim": embedder.dim, "memory_mode": "both"}
            st, engine = fresh_store(settings, tmp / f"n{n}", **overrides)
            memories = synthetic_memories(engine, n, seed)
            index = EdgeIndex(st.data_dir / "edge", embedder.dim)
            fill_index(index, memories, embedder.dim, seed)
            guard = open_guard(st)
            guard.push([Turn(scope, "user", sentence(random.Random(seed + i))) for i in range(SYNCED)])
            guard.drained()
            texts = [
                sentence(random.Random(seed * 1000 + i)).replace("The user", "what does the user")
                for i in range(queries)
            ]
            builtin = Runtime.open(
                st.model_copy(update={"memory_mode": "builtin"}),
                engine=engine,
                llm=None,
                embedder=embedder,
                index=index,
                busy=AlwaysIdle(),
            )
            both = Runtime.open(
                st, engine=engine, llm=None, embedder=embedder, index=index, busy=AlwaysIdle(), provider=guard
            )
            healthy = _side_by_side(builtin, both, texts, scope)
            after_healthy = _breaker(both)
            server.stop()  # the provider's endpoint goes away
            dead = _side_by_side(builtin, both, texts, scope)
            rows += [
                {"memories": n, "mode": "builtin alone", **percentiles(healthy[0] + dead[0]), "breaker": "-"},
                {"memories": n, "mode": "both, mem0 healthy", **percentiles(healthy[1]), "breaker": after_healthy},
                {"memories": n, "mode": "both, mem0 dead", **percentiles(dead[1]), "breaker": _breaker(both)},
            ]
            guard.close()
            index.close()
            engine.dispose()
    return {
        "rows": rows,
        "deadline_ms": settings.provider_deadline_ms,
        "breaker_opens_after": settings.provider_breaker_failures,
        "synced_turns": SYNCED,
        "goal": "both with a dead provider within 2x of builtin alone at p95",
    }


def _side_by_side(builtin: Runtime, both: Runtime, texts: list[str], scope: Scope) -> tuple[list[float], list[float]]:
    """Each query recalled in builtin and then in both, in turn, so the two share the machine's
    moment (on a busy machine, timing one mode after the other would time the load instead)."""
    from dreamer.online.modes import modal_recall

    calls: list[Callable[[], Any]] = [
        partial(modal_recall, rt, q, scope, k=10) for q in texts for rt in (builtin, both)
    ]
    samples = quiet_timings(calls)
    gc.unfreeze()
    return samples[0::2], samples[1::2]


def _breaker(rt: Runtime) -> str:
    return rt.provider.state if rt.provider is not None else "-"
