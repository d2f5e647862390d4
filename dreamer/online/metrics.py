"""The Prometheus metrics of the HTTP API: requests and latencies, flushes, dream runs and LLM tokens
(of dream runs, flushes and compaction summaries)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func
from sqlmodel import select

from dreamer.core.models import DreamRun
from dreamer.engine.runtime import Runtime
from dreamer.online.compaction.compact import BILLED
from dreamer.online.flush.notes import FlushResult
from dreamer.store.db import session_scope


class Metrics:
    """A per-app registry: requests and latencies, flushes, dream runs and LLM tokens."""

    def __init__(self, rt: Runtime) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "dreamer_http_requests", "HTTP requests served", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "dreamer_http_request_seconds", "HTTP request latency", ["method", "route"], registry=self.registry
        )
        self.flushes = Counter("dreamer_flushes", "Daily-note flushes by outcome", ["status"], registry=self.registry)
        self.flush_tokens = {"prompt": 0, "completion": 0}
        self.registry.register(_StoreCollector(rt, self))

    def flushed(self, result: FlushResult | None, exc: BaseException | None) -> None:
        """Count a background flush that ended (`FlushRunner`'s `on_done`)."""
        self.flushes.labels(status="failed" if exc is not None or result is None else result.status).inc()
        if result is not None:
            self.flush_tokens["prompt"] += result.prompt_tokens
            self.flush_tokens["completion"] += result.completion_tokens


class _StoreCollector(Collector):
    """Dream runs and LLM tokens, read from SQL (and this process's flushes) at scrape time."""

    def __init__(self, rt: Runtime, metrics: Metrics) -> None:
        self.rt = rt
        self.metrics = metrics

    def describe(self) -> Iterable[Metric]:
        return [
            CounterMetricFamily("dreamer_dream_runs", "Dream runs by status", labels=["status"]),
            CounterMetricFamily("dreamer_llm_tokens", "LLM tokens by source and kind", labels=["source", "kind"]),
        ]

    def collect(self) -> Iterable[Metric]:
        runs = CounterMetricFamily("dreamer_dream_runs", "Dream runs by status", labels=["status"])
        tokens = CounterMetricFamily("dreamer_llm_tokens", "LLM tokens by source and kind", labels=["source", "kind"])
        with session_scope(self.rt.engine) as s:
            for status, n in s.exec(select(DreamRun.status, func.count()).group_by(DreamRun.status)).all():
                runs.add_metric([status], n)
            prompt, completion = s.exec(
                select(
                    func.coalesce(func.sum(DreamRun.prompt_tokens), 0),
                    func.coalesce(func.sum(DreamRun.completion_tokens), 0),
                )
            ).one()
        tokens.add_metric(["dream", "prompt"], prompt)
        tokens.add_metric(["dream", "completion"], completion)
        tokens.add_metric(["flush", "prompt"], self.metrics.flush_tokens["prompt"])
        tokens.add_metric(["flush", "completion"], self.metrics.flush_tokens["completion"])
        tokens.add_metric(["compact", "prompt"], BILLED.prompt)
        tokens.add_metric(["compact", "completion"], BILLED.completion)
        return [runs, tokens]
