"""Each benchmark runs on a tiny size and emits its JSON keys (timings are never asserted)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import dreamer.cli.measure  # noqa: F401  (registers eval and bench)
from dreamer.cli import app
from dreamer.core.settings import Settings
from dreamer.embed.embedders import minilm_available
from dreamer.eval.bench import suite as bench

needs_minilm = pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")
COMMON = {"bench", "seed", "machine", "seconds", "goal"}


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "unused")


@needs_minilm
def test_recall_bench(settings):
    result = bench.run("recall", settings, sizes=(40,), queries=4)
    assert COMMON | {"rows", "reference_p95_over_edge_p95", "embedder_runtime"} <= set(result)
    assert result["embedder_runtime"] == "numpy"  # the `local` extra brings it
    assert {r["backend"] for r in result["rows"]} == {"edge", "qdrant-client-local", "query embedding alone"}
    assert {"p50_ms", "p95_ms", "mean_ms"} <= set(result["rows"][0])


def test_pass_bench(settings):
    result = bench.run("pass", settings, sizes=(20,))
    assert COMMON | {"rows", "pass_1pct_over_100pct"} <= set(result)
    assert [(r["changed_share"], r["sessions_processed"]) for r in result["rows"]] == [(0.0, 0), (0.01, 0), (1.0, 20)]


@needs_minilm
def test_consolidate_bench(settings):
    result = bench.run("consolidate", settings, sizes=(12,))
    assert COMMON | {"rows"} <= set(result)
    assert [(r["index"], r["stored"]) for r in result["rows"]] == [("edge", 12), ("documented edge", 12)]
    assert {"embedder_sentences_per_s", "consolidated_per_s", "ratio"} <= set(result["rows"][0])


def test_flush_bench(settings):
    result = bench.run("flush", settings, sizes=(5,))
    assert COMMON | {"meter_overhead_us_per_message", "trigger_append_ms", "flush_on_request_path"} <= set(result)
    assert result["flush_scheduled"] is True
    assert result["flush_on_request_path"] is False


@needs_minilm
def test_modes_bench(settings):
    """Builtin alone, and both beside the real mem0 healthy and then dead: its breaker open by the end."""
    result = bench.run("modes", settings, sizes=(30,), queries=6)
    assert COMMON | {"rows", "deadline_ms", "breaker_opens_after", "synced_turns"} <= set(result)
    assert [(r["mode"], r["breaker"]) for r in result["rows"]] == [
        ("builtin alone", "-"),
        ("both, mem0 healthy", "closed"),
        ("both, mem0 dead", "open"),
    ]


def test_bench_cli_json(tmp_path):
    res = CliRunner().invoke(app, ["--data-dir", str(tmp_path), "bench", "flush", "--small", "--json", "-"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["bench"] == "flush"
