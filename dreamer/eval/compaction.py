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
from dreamer.core.compaction.policy import Msg, policy_of, tool_names, total_tokens
from dreamer.core.settings import Settings
from dreamer.eval.compaction_cases import PLACES, Case, fact_report, truncated
from dreamer.llm.client import LLM
from dreamer.online.compaction.compact import Compacted, compact_messages
from dreamer.online.compaction.summary import summarise

Row = dict[str, Any]
SCRIPTED_NOTE = "no endpoint configured: summaries come from the scripted server's extractive stand-in, not a model"
PATHS = ("clear", "summary", "offload", "truncate", "unchanged", "over")


NO_MODEL_NOTE = "no model: the older span is offloaded whole, never summarised"


@contextmanager
def summariser(settings: Settings, model: bool = True) -> Iterator[tuple[LLM | None, dict[str, Any]]]:
    """The model summaries are asked of: the configured endpoint, else the scripted server; either
    reached as the runtime reaches its model (output mode and window learnt, in a scratch store).
    None with `model` False: the compaction runs as it does with no model configured."""
    if not model:
        yield None, {"name": "none", "scripted": False, "note": NO_MODEL_NOTE}
        return
    if settings.llm_configured:
        with scratch_endpoint(settings) as llm:
            yield llm, {"name": f"llm:{llm.name}", "scripted": False}
        return
    from dreamer.llm.scripted.compact import compact_script
    from dreamer.llm.scripted.server import ScriptedServer

    with ScriptedServer(compact_script) as server:
        scripted = settings.model_copy(update={"llm_base_url": server.url, "llm_model": "scripted"})
        with scratch_endpoint(scripted) as llm:
            yield llm, {"name": "scripted", "scripted": True, "note": SCRIPTED_NOTE}


@contextmanager
def scratch_endpoint(settings: Settings) -> Iterator[LLM]:
    """The configured model, reached as the runtime reaches it, with what it learns kept in a
    scratch store that is gone afterwards."""
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
    settings: Settings,
    case: Case,
    budget: int,
    found: Compacted | None,
    messages: list[Msg] | None = None,
    path: str = "",
    calls: int = 0,
) -> Row:
    """One row: the tokens (with the counter the API uses), the path, the budget used, and each
    planted fact with where it was kept. A baseline row passes its `messages` and `path`."""
    counter = policy_of(settings).counter
    before = total_tokens(case.messages, counter)
    out = found.messages if found is not None else messages or []
    offloads = found.offloads if found is not None else []
    after = total_tokens(out, counter)
    facts = fact_report(case, out, offloads)
    return {
        "case": case.name,
        "budget": budget,
        "tokens_before": before,
        "tokens_after": after,
        "budget_use": round(after / budget, 4),
        "model_calls": found.model_calls if found is not None else calls,
        "path": str(found.path) if found is not None else path,
        "pinned_tokens": found.pinned_tokens if found is not None else None,
        "facts_kept": round(sum(f["where"] != "lost" for f in facts) / len(facts), 4),
        "facts": facts,
    }


def compacted_row(settings: Settings, llm: LLM | None, case: Case, budget: int) -> Row:
    ids = itertools.count(1)
    found = compact_messages(settings, llm, case.messages, budget=budget, new_id=lambda: f"ofl_{next(ids):05d}")
    return row(settings, case, budget, found)


def truncate_row(settings: Settings, case: Case, budget: int) -> Row:
    counter = policy_of(settings).counter
    if total_tokens(case.messages, counter) <= budget:
        return row(settings, case, budget, None, list(case.messages), "unchanged")
    return row(settings, case, budget, None, truncated(case.messages, budget, counter), "truncate")


def summarise_row(settings: Settings, llm: LLM, case: Case, budget: int) -> Row:
    """Everything but the system rules summarised in one call with the same model and card."""
    if total_tokens(case.messages, policy_of(settings).counter) <= budget:
        return row(settings, case, budget, None, list(case.messages), "unchanged")
    rest = [m for m in case.messages if m.get("role") != "system"]
    found = summarise(llm, rest, tool_names(case.messages), settings.tool_result_chars, settings.compact_summary_tokens)
    if found.text is None:
        return row(settings, case, budget, None, list(case.messages), "unchanged", found.calls)
    system = [m for m in case.messages if m.get("role") == "system"]
    segment = [*system, {"role": "user", "content": f"{SUMMARY_HEAD}\n{found.text}"}]
    return row(settings, case, budget, None, segment, "summary", found.calls)


def overall(rows: list[Row], about: dict[str, Any]) -> dict[str, Any]:
    """Per path: how many rows, the mean share of facts kept, the mean token reduction and the
    least budget use (a summary's figures name the summariser)."""
    out: dict[str, Any] = {}
    for path in PATHS:
        taken = [r for r in rows if r["path"] == path]
        if taken:
            out[path] = {
                "n": len(taken),
                "facts_kept": round(fmean(r["facts_kept"] for r in taken), 4),
                "token_reduction": round(fmean(1 - r["tokens_after"] / max(r["tokens_before"], 1) for r in taken), 4),
                "least_budget_use": min(r["budget_use"] for r in taken),
            }
            if any(r["model_calls"] for r in taken):
                out[path]["summariser"] = about["name"]
    return out


def headline(rows: list[Row]) -> dict[str, Any]:
    """Over every row: facts kept, rows over the budget (and of those, how many with a pinned
    part that fits: none should be), and the least budget use of the rows that had to shrink."""
    shrunk = [r for r in rows if r["tokens_before"] > r["budget"]]
    over = [r for r in rows if r["tokens_after"] > r["budget"]]
    return {
        "rows": len(rows),
        "facts_kept": round(fmean(r["facts_kept"] for r in rows), 4) if rows else None,
        "over_budget": len(over),
        "over_budget_pinned_fits": sum(1 for r in over if (r["pinned_tokens"] or 0) <= r["budget"]),
        "least_budget_use": min((r["budget_use"] for r in shrunk if r["path"] != "over"), default=None),
        "least_budget_use_summary": min((r["budget_use"] for r in rows if r["path"] == "summary"), default=None),
        "facts_where": {p: sum(f["where"] == p for r in rows for f in r["facts"]) for p in (*PLACES, "lost")},
    }


def run_compaction_eval(
    settings: Settings,
    cases: list[Case],
    on_case: Callable[[str], None] | None = None,
    *,
    model: bool = True,
    baselines: bool = True,
) -> dict[str, Any]:
    """Every case under every budget, with the baselines (truncation; and a summary of everything
    when a model is asked) unless told not to, in one run."""
    started = time.monotonic()
    ours: list[Row] = []
    cut: list[Row] = []
    whole: list[Row] = []
    with summariser(settings, model) as (llm, about):
        for case in cases:
            for budget in case.budgets:
                ours.append(compacted_row(settings, llm, case, budget))
                if not baselines:
                    continue
                cut.append(truncate_row(settings, case, budget))
                if llm is not None:
                    whole.append(summarise_row(settings, llm, case, budget))
            if on_case is not None:
                on_case(case.name)
    compared = {"truncate": {"results": cut, "overall": overall(cut, about)}} if cut else {}
    if whole:
        compared["summarise"] = {"results": whole, "overall": overall(whole, about)}
    return {
        "cases": len(cases),
        "summariser": about,
        "counter": policy_of(settings).counter.name,
        "headline": headline(ours),
        "results": ours,
        "overall": overall(ours, about),
        "baselines": compared,
        "seconds": round(time.monotonic() - started, 1),
    }


def compaction_summary(r: dict[str, Any]) -> str:
    """The run in a few lines: the headline, then each path's facts kept and token reduction,
    ours then the baselines'."""

    def line(name: str, figures: dict[str, Any]) -> str:
        parts = [
            f"{p} n={v['n']} facts {v['facts_kept']:.3f} fewer tokens {v['token_reduction']:.3f}"
            for p, v in figures.items()
        ]
        return f"{name}: " + ("; ".join(parts) or "no rows")

    def f(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)

    h = r["headline"]
    scripted = " (summaries scripted: no endpoint)" if r["summariser"]["scripted"] else ""
    head = f"compaction: {r['cases']} case(s), summariser {r['summariser']['name']}{scripted}, tokens by {r['counter']}"
    total = (
        f"all: {h['rows']} rows, facts kept {f(h['facts_kept'])}, over budget {h['over_budget']} "
        f"({h['over_budget_pinned_fits']} with a pinned part that fits), least budget use {f(h['least_budget_use'])} "
        f"(summary rows {f(h['least_budget_use_summary'])}); facts "
        + ", ".join(f"{n} {p}" for p, n in h["facts_where"].items())
    )
    lines = [line("ours", r["overall"])] + [line(k, v["overall"]) for k, v in r["baselines"].items()]
    return "\n".join([head, total, *lines])
