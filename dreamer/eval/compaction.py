"""`dreamer eval compaction`: each case compacted under each of its budgets, and in the same run
two baselines over the same messages and model: truncating the oldest messages, and summarising
everything. A row reports the tokens before and after (cl100k over contents and tool calls),
the model calls, the path taken and the share of the planted facts the agent can still read (in
the new segment, or in an offloaded body whose marker is in it).

Without an endpoint the summary step is the scripted server's extractive stand-in
(`dreamer.llm.scripted.compact`), and the result says so beside every figure a summary made.
"""

from __future__ import annotations

import itertools
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from statistics import fmean
from typing import Any

from dreamer.core.compaction.plan import SUMMARY_HEAD
from dreamer.core.compaction.policy import Msg, tool_names, total_tokens
from dreamer.core.settings import Settings
from dreamer.eval.compaction_cases import Case, facts_kept, truncated
from dreamer.llm.client import LLM
from dreamer.online.compaction.compact import Compacted, compact_messages
from dreamer.online.compaction.summary import summarise

Row = dict[str, Any]
SCRIPTED_NOTE = "no endpoint configured: summaries come from the scripted server's extractive stand-in, not a model"
PATHS = ("clear", "summary", "truncate", "unchanged", "over")


@contextmanager
def summariser(settings: Settings) -> Iterator[tuple[LLM, dict[str, Any]]]:
    """The model summaries are asked of: the configured endpoint, else the scripted server; either
    reached as the runtime reaches its model (output mode and window learnt, in a scratch store)."""
    if settings.llm_configured:
        with _endpoint(settings) as llm:
            yield llm, {"name": f"llm:{llm.name}", "scripted": False}
        return
    from dreamer.llm.scripted.compact import compact_script
    from dreamer.llm.scripted.server import ScriptedServer

    with ScriptedServer(compact_script) as server:
        scripted = settings.model_copy(update={"llm_base_url": server.url, "llm_model": "scripted"})
        with _endpoint(scripted) as llm:
            yield llm, {"name": "scripted", "scripted": True, "note": SCRIPTED_NOTE}


@contextmanager
def _endpoint(settings: Settings) -> Iterator[LLM]:
    from dreamer.engine.endpoint import open_llm
    from dreamer.store import db

    with tempfile.TemporaryDirectory(prefix="dreamer-eval-") as scratch:
        engine = db.make_engine(f"sqlite:///{Path(scratch) / 'endpoint.db'}")
        try:
            db.upgrade(engine)
            llm = open_llm(settings, engine)
            assert llm is not None
            yield llm
        finally:
            engine.dispose()


def row(
    case: Case, budget: int, before: int, messages: list[Msg], calls: int, path: str, bodies: dict[str, str]
) -> Row:
    after = total_tokens(messages)
    if path != "unchanged" and after > budget:
        path = "over"
    if path == "unchanged" and before > budget:
        path = "over"
    return {
        "case": case.name,
        "budget": budget,
        "tokens_before": before,
        "tokens_after": after,
        "model_calls": calls,
        "path": path,
        "facts_kept": facts_kept(case, messages, bodies),
    }


def compacted_row(settings: Settings, llm: LLM, case: Case, budget: int) -> Row:
    ids = itertools.count(1)
    found: Compacted = compact_messages(
        settings, llm, case.messages, budget=budget, new_id=lambda: f"ofl_{next(ids):05d}"
    )
    bodies = {o.id: o.body for o in found.offloads}
    return row(case, budget, found.tokens_before, found.messages, found.model_calls, found.path, bodies)


def truncate_row(case: Case, budget: int) -> Row:
    before = total_tokens(case.messages)
    if before <= budget:
        return row(case, budget, before, list(case.messages), 0, "unchanged", {})
    return row(case, budget, before, truncated(case.messages, budget), 0, "truncate", {})


def summarise_row(settings: Settings, llm: LLM, case: Case, budget: int) -> Row:
    """Everything but the system rules summarised in one call with the same model and card."""
    before = total_tokens(case.messages)
    if before <= budget:
        return row(case, budget, before, list(case.messages), 0, "unchanged", {})
    rest = [m for m in case.messages if m.get("role") != "system"]
    found = summarise(llm, rest, tool_names(case.messages), settings.tool_result_chars, settings.compact_summary_tokens)
    if found.text is None:
        return row(case, budget, before, list(case.messages), found.calls, "unchanged", {})
    system = [m for m in case.messages if m.get("role") == "system"]
    segment = [*system, {"role": "user", "content": f"{SUMMARY_HEAD}\n{found.text}"}]
    return row(case, budget, before, segment, found.calls, "summary", {})


def overall(rows: list[Row], about: dict[str, Any]) -> dict[str, Any]:
    """Per path: how many rows, the mean share of facts kept and the mean token reduction (a
    summary's figures name the summariser)."""
    out: dict[str, Any] = {}
    for path in PATHS:
        taken = [r for r in rows if r["path"] == path]
        if taken:
            out[path] = {
                "n": len(taken),
                "facts_kept": round(fmean(r["facts_kept"] for r in taken), 4),
                "token_reduction": round(fmean(1 - r["tokens_after"] / max(r["tokens_before"], 1) for r in taken), 4),
            }
            if any(r["model_calls"] for r in taken):
                out[path]["summariser"] = about["name"]
    return out


def run_compaction_eval(
    settings: Settings, cases: list[Case], on_case: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Every case under every budget, with both baselines, in one run."""
    started = time.monotonic()
    ours: list[Row] = []
    cut: list[Row] = []
    whole: list[Row] = []
    with summariser(settings) as (llm, about):
        for case in cases:
            for budget in case.budgets:
                ours.append(compacted_row(settings, llm, case, budget))
                cut.append(truncate_row(case, budget))
                whole.append(summarise_row(settings, llm, case, budget))
            if on_case is not None:
                on_case(case.name)
    return {
        "cases": len(cases),
        "summariser": about,
        "results": ours,
        "overall": overall(ours, about),
        "baselines": {
            "truncate": {"results": cut, "overall": overall(cut, about)},
            "summarise": {"results": whole, "overall": overall(whole, about)},
        },
        "seconds": round(time.monotonic() - started, 1),
    }


def compaction_summary(r: dict[str, Any]) -> str:
    """One line: each path's facts kept and token reduction, ours then the baselines'."""

    def line(name: str, figures: dict[str, Any]) -> str:
        parts = [
            f"{p} n={v['n']} facts {v['facts_kept']:.3f} fewer tokens {v['token_reduction']:.3f}"
            for p, v in figures.items()
        ]
        return f"{name}: " + ("; ".join(parts) or "no rows")

    b = r["baselines"]
    scripted = " (summaries scripted: no endpoint)" if r["summariser"]["scripted"] else ""
    return f"compaction: {r['cases']} case(s), summariser {r['summariser']['name']}{scripted}\n" + "\n".join(
        [
            line("ours", r["overall"]),
            line("truncate", b["truncate"]["overall"]),
            line("summarise", b["summarise"]["overall"]),
        ]
    )
