"""Seeded performance benchmarks: recall latency, dream-pass scaling, consolidation throughput,
the flush meter's overhead and recall in the memory modes. Each reports ratios measured in the same run, since absolute times on
a shared machine are noise; `table` renders a result for the terminal.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from dreamer.core.settings import Settings
from dreamer.eval.bench.consolidate import bench_consolidate
from dreamer.eval.bench.dream_pass import bench_pass
from dreamer.eval.bench.fixtures import BenchResult
from dreamer.eval.bench.flush import bench_flush
from dreamer.eval.bench.modes import bench_modes
from dreamer.eval.bench.recall import bench_recall

SIZES = {
    "recall": ((10_000, 100_000), (300, 1_000)),
    "pass": ((10_000, 100_000), (100, 400)),
    "consolidate": ((2_000,), (40,)),
    "flush": ((2_000,), (60,)),
    "modes": ((10_000,), (300,)),
}


def run(
    which: str,
    settings: Settings,
    *,
    small: bool = False,
    seed: int = 7,
    sizes: Sequence[int] | None = None,
    **options: Any,
) -> BenchResult:
    """Run one bench (`small`: smoke sizes; `sizes` overrides both; `options` go to the bench)."""
    sizes = sizes or SIZES[which][1 if small else 0]
    fn: Callable[..., BenchResult] = {
        "recall": bench_recall,
        "pass": bench_pass,
        "consolidate": bench_consolidate,
        "flush": bench_flush,
        "modes": bench_modes,
    }[which]
    with tempfile.TemporaryDirectory(prefix=f"dreamer-bench-{which}-") as tmp:
        started = time.perf_counter()
        result = fn(settings, Path(tmp), sizes, seed, **options)
    result.update(bench=which, seed=seed, machine=machine(), seconds=round(time.perf_counter() - started, 2))
    return result


def machine() -> BenchResult:
    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "processor": platform.processor() or platform.machine(),
    }


# --------------------------------------------------------------------------- output


def table(result: dict[str, Any]) -> Table:
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


def _vertical(result: dict[str, Any]) -> Table:
    t = Table(
        title=f"bench {result['bench']} (seed {result['seed']}, {result['machine']['cpus']} cpus, {result['seconds']} s)"
    )
    t.add_column("measure")
    t.add_column("value")
    for key, value in result.items():
        if key not in ("bench", "seed", "machine", "seconds"):
            t.add_row(key, str(value))
    return t
