"""Seeded synthetic text, fresh stores and timing summaries the benches share."""

from __future__ import annotations

import gc
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from dreamer.core.settings import Settings
from dreamer.embed.embedders import build_local
from dreamer.embed.minilm import MiniLMEmbedder
from dreamer.embed.sentence_transformer import SentenceTransformerEmbedder
from dreamer.store import db

BenchResult = dict[str, Any]  # a bench's JSON-ready report: rows, ratios, the goal

UNLIMITED = 10**9
WORDS = (
    "tea coffee hiking mountains painting pottery guitar piano violin novel fantasy camping beach garden "
    "recipe bread soup running marathon yoga swimming chess football basketball tennis museum concert "
    "jazz opera train flight hotel budget savings mortgage daughter son sister brother grandmother dog "
    "cat turtle parrot bakery startup design deploy database kernel compiler python rust keyboard laptop"
).split()
VERBS = ("likes", "prefers", "avoids", "plans", "bought", "visited", "started", "finished", "loves", "learns")


def sentence(rng: random.Random) -> str:
    a, b, c = rng.sample(WORDS, 3)
    return f"The user {rng.choice(VERBS)} {a} and {b}, especially {c} on {rng.choice(('weekends', 'mondays', 'holidays'))}."


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]

    return {
        "p50_ms": round(pick(0.50) * 1000, 3),
        "p95_ms": round(pick(0.95) * 1000, 3),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 3),
    }


def fresh_store(settings: Settings, data_dir: Path, **overrides: Any) -> tuple[Settings, Engine]:
    st = settings.model_copy(update={"data_dir": data_dir, "database_url": "", "qdrant_url": "", **overrides})
    data_dir.mkdir(parents=True, exist_ok=True)
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    return st, engine


def local_embedder(settings: Settings) -> MiniLMEmbedder | SentenceTransformerEmbedder:
    embedder = build_local(settings)
    embedder.embed(["warm up"])
    return embedder


def quiet_timings(calls: list[Callable[[], Any]]) -> list[float]:
    """Warm up once, freeze what exists for the collector, then time each call."""
    calls[0]()
    gc.collect()
    gc.freeze()
    return timed(calls)


def timed(calls: list[Callable[[], Any]]) -> list[float]:
    out: list[float] = []
    for call in calls:
        started = time.perf_counter()
        call()
        out.append(time.perf_counter() - started)
    return out
