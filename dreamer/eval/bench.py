"""Seeded performance benchmarks: recall latency, dream-pass scaling, consolidation throughput and
the flush meter's overhead. Each reports ratios measured in the same run, since absolute times on
a shared machine are noise; `table` renders a result for the terminal.
"""

from __future__ import annotations

import gc
import logging
import os
import platform
import random
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table
from sqlalchemy import insert, update
from sqlmodel import select

from dreamer.core.models import Cursor, Memory, Message, Session, new_memory_id, utcnow
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.embed.embedders import CachedEmbedder, MiniLMEmbedder, set_torch_threads
from dreamer.engine import outbox
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.dream import apply_all, dream_pass, plan_candidates
from dreamer.engine.extract import Candidate
from dreamer.engine.runtime import Runtime, settle
from dreamer.index.base import EdgeIndex, IndexPoint, QdrantClientIndex
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

UNLIMITED = 10**9
WORDS = (
    "tea coffee hiking mountains painting pottery guitar piano violin novel fantasy camping beach garden "
    "recipe bread soup running marathon yoga swimming chess football basketball tennis museum concert "
    "jazz opera train flight hotel budget savings mortgage daughter son sister brother grandmother dog "
    "cat turtle parrot bakery startup design deploy database kernel compiler python rust keyboard laptop"
).split()
VERBS = ("likes", "prefers", "avoids", "plans", "bought", "visited", "started", "finished", "loves", "learns")
SIZES = {
    "recall": ((10_000, 100_000), (300, 1_000)),
    "pass": ((10_000, 100_000), (100, 400)),
    "consolidate": ((2_000,), (40,)),
    "flush": ((2_000,), (60,)),
}


def run(
    which: str, settings: Settings, *, small: bool = False, seed: int = 7, sizes: tuple | None = None, **options: Any
) -> dict:
    """Run one bench (`small`: smoke sizes; `sizes` overrides both; `options` go to the bench)."""
    sizes = sizes or SIZES[which][1 if small else 0]
    fn: Callable[..., dict] = {
        "recall": bench_recall,
        "pass": bench_pass,
        "consolidate": bench_consolidate,
        "flush": bench_flush,
    }[which]
    with tempfile.TemporaryDirectory(prefix=f"dreamer-bench-{which}-") as tmp:
        started = time.perf_counter()
        result = fn(settings, Path(tmp), sizes, seed, **options)
    result.update(bench=which, seed=seed, machine=machine(), seconds=round(time.perf_counter() - started, 2))
    return result


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }


# --------------------------------------------------------------------------- shared helpers


def sentence(rng: random.Random) -> str:
    a, b, c = rng.sample(WORDS, 3)
    return f"The user {rng.choice(VERBS)} {a} and {b}, especially {c} on {rng.choice(('weekends', 'mondays', 'holidays'))}."


def percentiles(samples: list[float]) -> dict:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]  # noqa: E731
    return {
        "p50_ms": round(pick(0.50) * 1000, 3),
        "p95_ms": round(pick(0.95) * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def fresh_store(settings: Settings, data_dir: Path, **overrides) -> tuple[Settings, Any]:
    st = settings.model_copy(update={"data_dir": data_dir, "database_url": "", "qdrant_url": "", **overrides})
    data_dir.mkdir(parents=True, exist_ok=True)
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    return st, engine


def local_embedder(settings: Settings):
    embedder = MiniLMEmbedder(batch=settings.embed_batch, cache_dir=settings.model_cache)
    embedder.embed(["warm up"])
    return embedder


# --------------------------------------------------------------------------- recall


def bench_recall(settings: Settings, tmp: Path, sizes, seed: int, queries: int = 60) -> dict:
    """recall() p50/p95 at each size, the query embedded for real, on Qdrant Edge and then on
    qdrant-client local mode (the reference), each alone in the process with the same queries.
    The synthetic fill is moved out of the garbage collector's way first (`gc.freeze`), as a
    long-running server does after start-up, so timings are not full collections of bench data."""
    from dreamer.online.recall import recall

    threads = _serving_threads(settings)
    embedder = local_embedder(settings)
    rows = []
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
                samples = _quiet_timings(
                    [lambda q=q, rt=rt: recall(rt, q, Scope(user_id="bench"), k=10) for q in texts]
                )
            finally:
                index.close()
                gc.unfreeze()
            rows.append({"memories": n, "backend": backend, "fill_seconds": round(fill, 2), **percentiles(samples)})
        embed_only = _quiet_timings([lambda q=q: embedder.embed([q]) for q in texts])
        gc.unfreeze()
        rows.append({"memories": n, "backend": "query embedding alone", **percentiles(embed_only)})
        engine.dispose()
    ratios = {str(n): _ratio(rows, n) for n in sizes}
    return {
        "rows": rows,
        "reference_p95_over_edge_p95": ratios,
        "torch_threads": threads,
        "query_embedding": "onnxruntime" if embedder._query is not None else "torch",
        "goal": "edge p95 <= 25 ms at the largest size",
    }


def _serving_threads(settings: Settings) -> int | None:
    """The threads `dreamer serve` gives the embedder, since recall is what a server does."""
    return set_torch_threads(settings.serve_torch_threads)


def _quiet_timings(calls: list[Callable[[], Any]]) -> list[float]:
    """Warm up once, freeze what exists for the collector, then time each call."""
    calls[0]()
    gc.collect()
    gc.freeze()
    return _timed(calls)


def _ratio(rows: list[dict], n: int) -> float:
    edge = next(r for r in rows if r["memories"] == n and r["backend"] == "edge")
    ref = next(r for r in rows if r["memories"] == n and r["backend"] == "qdrant-client-local")
    return round(ref["p95_ms"] / max(edge["p95_ms"], 1e-9), 2)


def _recall_index(backend: str, st: Settings, dim: int):
    if backend == "edge":
        return EdgeIndex(st.data_dir / "edge", dim)
    return QdrantClientIndex.local(st.data_dir / "qdrant-local", collection="bench", dim=dim)


def _timed(calls: list[Callable[[], Any]]) -> list[float]:
    out = []
    for call in calls:
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out


def synthetic_memories(engine, n: int, seed: int) -> list[dict]:
    rng = random.Random(seed)
    now = utcnow()
    rows = []
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
            s.exec(insert(Memory), params=rows[start : start + 5_000])
    return rows


def fill_index(index, memories: list[dict], dim: int, seed: int) -> None:
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
    if hasattr(index, "optimize"):
        index.optimize()


def _unit_rows(rng, n: int, dim: int) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def _payload(m: dict) -> dict:
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


# --------------------------------------------------------------------------- the dream pass


def bench_pass(settings: Settings, tmp: Path, sizes, seed: int) -> dict:
    """Dream-pass wall time with 0 %, 1 % and 100 % of the sessions changed, the LLM instant."""
    from dreamer.llm.client import OpenAILLM, build_openai_client
    from dreamer.llm.scripted import Reply, ScriptedServer

    rows = []
    with ScriptedServer(lambda body: Reply(content='{"memories":[]}')) as server:
        for n in sizes:
            st, engine = fresh_store(
                settings,
                tmp / f"n{n}",
                llm_base_url=server.url,
                embedder="none",
                max_sessions_per_pass=UNLIMITED,
                min_rounds=0,
                triage=False,
                max_age_days=100 * 365,
                llm_pass_token_budget=UNLIMITED,
            )
            sessions = synthetic_sessions(engine, n, seed)
            llm = OpenAILLM(build_openai_client(st), model="scripted", max_retries=0)
            index = EdgeIndex(st.index_dir, st.embed_dim)
            rt = Runtime.open(st, engine=engine, llm=llm, embedder=None, index=index, busy=AlwaysIdle())
            rng = random.Random(seed)
            for share in (0.0, 0.01, 1.0):
                changed = touch_sessions(engine, sessions, share, rng)
                started = time.perf_counter()
                run_row = dream_pass(rt, trigger="bench", force=True)
                seconds = time.perf_counter() - started
                rows.append(
                    {
                        "sessions": n,
                        "changed_share": share,
                        "changed": changed,
                        "seconds": round(seconds, 3),
                        "sessions_processed": run_row.sessions,
                        "llm_calls": run_row.llm_calls,
                    }
                )
            rt.close()
            index.close()
            engine.dispose()
    ratios = {str(n): _share_ratio(rows, n) for n in sizes}
    return {
        "rows": rows,
        "pass_1pct_over_100pct": ratios,
        "goal": "0 % changed <= 0.5 s at the largest size; 1 %/100 % close to 0.01",
    }


def _share_ratio(rows: list[dict], n: int) -> float:
    one = next(r for r in rows if r["sessions"] == n and r["changed_share"] == 0.01)
    full = next(r for r in rows if r["sessions"] == n and r["changed_share"] == 1.0)
    return round(one["seconds"] / max(full["seconds"], 1e-9), 4)


MESSAGE_TOKENS = 16  # what a synthetic message counts (the sessions' running totals agree with it)


def synthetic_sessions(engine, n: int, seed: int, messages: int = 4) -> list[int]:
    """`n` sessions of `messages` alternating turns, all already processed (cursor at the end)."""
    rng = random.Random(seed)
    now = utcnow() - timedelta(hours=1)
    with session_scope(engine) as s:
        s.exec(
            insert(Session),
            params=[
                dict(
                    external_id=f"s{i}",
                    source="bench",
                    user_id=f"u{i % max(1, n // 10)}",
                    mode="agent",
                    created_at=now,
                    updated_at=now,
                    message_count=messages,
                    rounds=messages // 2,
                    last_seq=messages,
                    token_total=messages * MESSAGE_TOKENS,
                )
                for i in range(n)
            ],
        )
        ids = list(s.exec(select(Session.id).order_by(Session.id)).all())
        s.exec(
            insert(Cursor),
            params=[dict(session_id=i, processed_seq=messages, status="ok", attempts=0, updated_at=now) for i in ids],
        )
        batch = []
        for sid in ids:
            for seq in range(1, messages + 1):
                batch.append(_message(sid, seq, sentence(rng), now))
            if len(batch) >= 20_000:
                s.exec(insert(Message), params=batch)
                batch = []
        if batch:
            s.exec(insert(Message), params=batch)
    return ids


def _message(sid: int, seq: int, text: str, at) -> dict:
    return dict(
        session_id=sid,
        seq=seq,
        role="user" if seq % 2 else "assistant",
        content=text,
        content_hash=f"{sid}:{seq}",
        created_at=at,
        token_count=MESSAGE_TOKENS,
    )


def touch_sessions(engine, sessions: list[int], share: float, rng: random.Random) -> int:
    """Append one message to `share` of the sessions; returns how many changed."""
    chosen = rng.sample(sessions, int(round(len(sessions) * share)))
    if not chosen:
        return 0
    now = utcnow() - timedelta(minutes=30)
    with session_scope(engine) as s:
        last = (
            dict(s.exec(select(Session.id, Session.last_seq).where(Session.id.in_(chosen))).all())
            if len(chosen) < 30_000
            else dict(s.exec(select(Session.id, Session.last_seq)).all())
        )
        s.exec(insert(Message), params=[_message(sid, last[sid] + 1, sentence(rng), now) for sid in chosen])
        for start in range(0, len(chosen), 5_000):
            part = chosen[start : start + 5_000]
            s.exec(
                update(Session)
                .where(Session.id.in_(part))
                .values(
                    last_seq=Session.last_seq + 1,
                    message_count=Session.message_count + 1,
                    token_total=Session.token_total + MESSAGE_TOKENS,
                    updated_at=now,
                )
            )
    return len(chosen)


# --------------------------------------------------------------------------- consolidation


def bench_consolidate(settings: Settings, tmp: Path, sizes, seed: int, batch: int = 16, users: int = 20) -> dict:
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
    settings: Settings, folder: Path, raw, n: int, seed: int, batch: int, users: int, documented: bool
) -> dict:
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


def _consolidate_batch(rt, scope: Scope, texts: list[str]) -> None:
    """One session's worth of candidates, under the user's consolidation lock as in a pass:
    planned against the scope, applied, indexed."""
    cands = [Candidate(kind="preference", text=t, seqs=[1]) for t in texts]
    with rt.user_locks.hold(scope.user_id) as lock:
        planned = plan_candidates(rt, scope, scope.user_id, cands, None, exact=True)
        lock.confirm()
        with session_scope(rt.engine) as s:
            apply_all(s, planned, scope, source="dream", evidence=[[{"session_id": None, "seqs": [1]}]] * len(planned))
        outbox.drain(rt, render=False)  # as a pass does after each session; the views are rendered at its end


# --------------------------------------------------------------------------- flush meter


def bench_flush(settings: Settings, tmp: Path, sizes, seed: int) -> dict:
    """Microseconds the meter adds per appended message (append with meter vs plain recording),
    and where a due flush runs: a slow model must not slow the append that triggers it."""
    from dreamer.ingest.store import append_messages
    from dreamer.llm.client import OpenAILLM, build_openai_client
    from dreamer.llm.scripted import Reply, ScriptedServer
    from dreamer.online import flush as flushing

    n = sizes[0]
    delay = 0.5
    rng = random.Random(seed)
    texts = [sentence(rng) for _ in range(n)]
    script = lambda body: Reply.delay(delay, Reply(content='{"notes":[]}'))  # noqa: E731
    with ScriptedServer(script) as server:
        st, engine = fresh_store(
            settings, tmp / "flush", llm_base_url=server.url, embedder="none", flush_every_messages=UNLIMITED
        )
        llm = OpenAILLM(build_openai_client(st), model="scripted", max_retries=0)
        index = EdgeIndex(st.index_dir, st.embed_dim)
        rt = Runtime.open(st, engine=engine, llm=llm, embedder=None, index=index, busy=AlwaysIdle())
        scope = Scope(user_id="bench")
        runner = flushing.FlushRunner(rt, workers=1)
        plain, metered = [], []
        for t in texts:  # interleaved, so machine noise hits both alike
            plain += _timed(
                [
                    lambda t=t: append_messages(
                        engine, "plain", [{"role": "user", "content": t}], user_id="bench", source="api"
                    )
                ]
            )
            metered += _timed(
                [lambda t=t: flushing.append(rt, scope, "metered", [{"role": "user", "content": t}], runner=runner)]
            )
        trigger = _trigger_timing(rt, scope, runner, flushing)
        runner.close()
        rt.close()
        index.close()
        engine.dispose()
    overhead_us = (statistics.median(metered) - statistics.median(plain)) * 1e6
    return {
        "messages": n,
        "plain_append_us_p50": round(statistics.median(plain) * 1e6, 1),
        "metered_append_us_p50": round(statistics.median(metered) * 1e6, 1),
        "meter_overhead_us_per_message": round(overhead_us, 1),
        "meter_overhead_ratio": round(statistics.median(metered) / statistics.median(plain), 3),
        **trigger,
        "model_delay_s": delay,
        "goal": "the append that triggers a flush returns well before the flush ends; the flush runs on a runner thread",
    }


def _trigger_timing(rt, scope: Scope, runner, flushing) -> dict:
    threads: list[str] = []
    done = threading.Event()
    original = runner._run

    def run_and_note(session_id, trigger):
        threads.append(threading.current_thread().name)
        try:
            return original(session_id, trigger)
        finally:
            done.set()

    runner._run = run_and_note
    started = time.perf_counter()
    meter = flushing.append(
        rt,
        scope,
        "trigger",
        [{"role": "user", "content": "one more"}],
        context_tokens=flushing.flush_point(rt.settings),
        runner=runner,
    )
    append_s = time.perf_counter() - started
    done.wait(timeout=60)
    flush_s = time.perf_counter() - started
    return {
        "trigger_append_ms": round(append_s * 1000, 2),
        "flush_finished_ms": round(flush_s * 1000, 2),
        "flush_scheduled": meter.flush_scheduled,
        "flush_thread": threads[0] if threads else None,
        "request_thread": threading.current_thread().name,
        "flush_on_request_path": bool(threads) and threads[0] == threading.current_thread().name,
    }


# --------------------------------------------------------------------------- output


def table(result: dict) -> Table:
    if "rows" not in result:
        return _vertical(result)
    rows = result["rows"]
    title = f"bench {result['bench']} (seed {result['seed']}, {result['machine']['cpus']} cpus, {result['seconds']} s)"
    t = Table(title=title)
    keys = [k for k in rows[0] if k not in ("bench", "seed", "machine")]
    for key in keys:
        t.add_column(key)
    for row in rows:
        t.add_row(*(str(row.get(k, "")) for k in keys))
    for key, value in result.items():
        if key not in ("rows", "machine", "bench", "seed", "seconds"):
            t.caption = (t.caption + "; " if t.caption else "") + f"{key}: {value}"
    return t


def _vertical(result: dict) -> Table:
    t = Table(
        title=f"bench {result['bench']} (seed {result['seed']}, {result['machine']['cpus']} cpus, {result['seconds']} s)"
    )
    t.add_column("measure")
    t.add_column("value")
    for key, value in result.items():
        if key not in ("bench", "seed", "machine", "seconds"):
            t.add_row(key, str(value))
    return t
