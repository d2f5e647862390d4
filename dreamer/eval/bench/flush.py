"""The flush-meter bench: the meter's cost per appended message and where a due flush runs."""

from __future__ import annotations

import random
import statistics
import threading
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.eval.bench.fixtures import (
    UNLIMITED,
    BenchResult,
    fresh_store,
    sentence,
    timed,
)
from dreamer.index.edge import EdgeIndex
from dreamer.store.busy import AlwaysIdle

if TYPE_CHECKING:
    from dreamer.online.flush.notes import FlushResult
    from dreamer.online.flush.runner import FlushRunner


def bench_flush(settings: Settings, tmp: Path, sizes: Sequence[int], seed: int) -> BenchResult:
    """Microseconds the meter adds per appended message (append with meter vs plain recording),
    and where a due flush runs: a slow model must not slow the append that triggers it."""
    from dreamer.llm.client import OpenAILLM, build_openai_client
    from dreamer.llm.scripted.server import Reply, ScriptedServer
    from dreamer.online.flush.runner import FlushRunner

    n = sizes[0]
    delay = 0.5
    rng = random.Random(seed)
    texts = [sentence(rng) for _ in range(n)]
    with ScriptedServer(lambda body: Reply.delay(delay, Reply(content='{"notes":[]}'))) as server:
        st, engine = fresh_store(
            settings, tmp / "flush", llm_base_url=server.url, embedder="none", flush_every_messages=UNLIMITED
        )
        llm = OpenAILLM(build_openai_client(st), model="scripted", max_retries=0)
        index = EdgeIndex(st.index_dir, st.embed_dim)
        rt = Runtime.open(st, engine=engine, llm=llm, embedder=None, index=index, busy=AlwaysIdle())
        scope = Scope(user_id="bench")
        runner = FlushRunner(rt, workers=1)
        plain, metered = _append_timings(rt, scope, runner, texts)
        trigger = _trigger_timing(rt, scope, runner)
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


def _append_timings(
    rt: Runtime, scope: Scope, runner: FlushRunner, texts: list[str]
) -> tuple[list[float], list[float]]:
    """Each text appended by plain recording and through the meter, interleaved so machine noise
    hits both alike."""
    from dreamer.ingest.store import append_messages
    from dreamer.online.session_append import append

    plain: list[float] = []
    metered: list[float] = []
    for t in texts:
        message = [{"role": "user", "content": t}]
        plain += timed([partial(append_messages, rt.engine, "plain", message, user_id="bench", source="api")])
        metered += timed([partial(append, rt, scope, "metered", message, runner=runner)])
    return plain, metered


def _trigger_timing(rt: Runtime, scope: Scope, runner: FlushRunner) -> BenchResult:
    from dreamer.online.flush.trigger import flush_point
    from dreamer.online.session_append import append

    threads: list[str] = []
    done = threading.Event()
    original = runner._run

    def run_and_note(session_id: int, trigger: str | None) -> FlushResult:
        threads.append(threading.current_thread().name)
        try:
            return original(session_id, trigger)
        finally:
            done.set()

    setattr(runner, "_run", run_and_note)  # noqa: B010  (wrapping the runner's worker body)
    started = time.perf_counter()
    meter = append(
        rt,
        scope,
        "trigger",
        [{"role": "user", "content": "one more"}],
        context_tokens=flush_point(rt.settings),
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
