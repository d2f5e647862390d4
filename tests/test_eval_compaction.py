"""`dreamer eval compaction` on the dev set: the rows' shape, clearing against both baselines in
the same run, and bad case files refused with one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import assert_one_error_line, run

from dreamer.core.compaction.policy import total_tokens
from dreamer.core.errors import IngestError
from dreamer.eval.compaction_cases import load_cases, truncated

DEV = Path(__file__).parent / "data" / "compaction-dev.json"
NEW = Path(__file__).parent / "data" / "compaction-trajectories.json"
ROW_KEYS = [
    "case",
    "budget",
    "tokens_before",
    "tokens_after",
    "budget_use",
    "model_calls",
    "path",
    "pinned_tokens",
    "facts_kept",
    "facts",
]


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("eval")
    proc = run(tmp, "eval", "compaction", str(DEV), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == (
        "compaction: 7 case(s), summariser scripted (summaries scripted: no endpoint), tokens by cl100k"
    )
    return json.loads(proc.stdout)


def test_the_dev_set_is_long_and_tool_heavy():
    cases = load_cases(DEV)
    assert len(cases) == 7
    for case in cases:
        assert total_tokens(case.messages) >= 4_000
        assert sum(m["role"] == "tool" for m in case.messages) >= 9
        assert {f.kind for f in case.facts} >= {"id", "constraint", "pending_step"}


def test_rows_have_the_issue_shape_for_ours_and_both_baselines(result):
    rows = [result["results"], result["baselines"]["truncate"]["results"], result["baselines"]["summarise"]["results"]]
    for found in rows:
        assert len(found) == 13
        assert all(list(r) == ROW_KEYS for r in found)
    assert result["summariser"]["scripted"] is True


def test_clearing_alone_keeps_the_facts_with_far_fewer_tokens(result):
    assert result["overall"] == {
        "clear": {"n": 10, "facts_kept": 1.0, "token_reduction": 0.7904, "least_budget_use": 0.9727},
        "summary": {
            "n": 3,
            "facts_kept": 1.0,
            "token_reduction": 0.8453,
            "least_budget_use": 0.974,
            "summariser": "scripted",
        },
    }
    assert all(r["model_calls"] == 0 for r in result["results"] if r["path"] == "clear")
    assert result["headline"] == {
        "rows": 13,
        "facts_kept": 1.0,
        "over_budget": 0,
        "over_budget_pinned_fits": 0,
        "least_budget_use": 0.9727,
        "least_budget_use_summary": 0.974,
        "facts_where": {"visible": 43, "summary": 4, "marker": 4, "lost": 0},
    }
    assert result["baselines"]["truncate"]["overall"]["truncate"]["facts_kept"] == 0.3974
    assert result["baselines"]["summarise"]["overall"]["summary"]["facts_kept"] == 0.8846


def test_each_row_names_each_fact_and_where_it_is(result):
    [row] = [r for r in result["results"] if (r["case"], r["budget"]) == ("web-research", 4700)]
    assert [f["where"] for f in row["facts"]] == ["marker", "visible", "visible", "visible"]
    assert set(row["facts"][0]) == {"kind", "fact", "where"}
    summarised = [r for r in result["results"] if r["path"] == "summary"]
    assert all(r["budget_use"] >= 0.85 and r["tokens_after"] <= r["budget"] for r in summarised)


@pytest.fixture(scope="module")
def trajectories(tmp_path_factory):
    """The trajectories set, compacted with the scripted summariser and with no model."""
    tmp = tmp_path_factory.mktemp("new")
    out = {}
    for lane, extra in (("scripted", []), ("none", ["--no-model"])):
        proc = run(tmp, "eval", "compaction", str(NEW), "--json", "-", *extra)
        assert proc.returncode == 0, proc.stderr
        out[lane] = json.loads(proc.stdout)
    return out


def test_the_trajectories_set_is_coding_support_and_research():
    cases = load_cases(NEW)
    assert len(cases) == 12
    assert all(5 <= len(c.facts) <= 8 and len(c.budgets) == 2 for c in cases)
    kinds = {c.name.split("-")[0] for c in cases}
    assert kinds == {"swe", "openhands", "claude", "tau", "support", "research"}


def test_no_row_over_budget_unless_its_pinned_part_is(trajectories):
    for lane in ("scripted", "none"):
        rows = trajectories[lane]["results"]
        over = [(r["case"], r["budget"]) for r in rows if r["tokens_after"] > r["budget"]]
        assert over == [("support-telecom-billing", 4500), ("support-telecom-billing", 2300)]
        assert all(
            r["pinned_tokens"] > r["budget"] and r["path"] == "over" for r in rows if r["tokens_after"] > r["budget"]
        )


def test_the_trajectories_keep_their_facts_and_fill_their_budget(trajectories):
    scripted, none = trajectories["scripted"]["headline"], trajectories["none"]["headline"]
    assert (scripted["facts_kept"], scripted["least_budget_use_summary"]) == (1.0, 0.9625)
    assert scripted["facts_where"] == {"visible": 114, "summary": 19, "marker": 19, "lost": 0}
    assert (none["facts_kept"], none["least_budget_use"]) == (1.0, 0.9571)
    assert trajectories["none"]["overall"]["offload"]["n"] == 8
    assert all(r["model_calls"] == 0 for r in trajectories["none"]["results"])


def test_truncation_never_splits_a_call_from_its_result():
    for case in load_cases(DEV):
        kept = truncated(case.messages, case.budgets[-1])
        calls = {c["id"] for m in kept for c in m.get("tool_calls") or []}
        assert calls == {m["tool_call_id"] for m in kept if m["role"] == "tool"}


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("{}", 'expected {"cases": [...]} with at least one case'),
        ("not json", "not JSON"),
        (
            json.dumps(
                {"cases": [{"name": "x", "messages": [{"role": "user", "content": "a"}], "facts": [], "budgets": [9]}]}
            ),
            "case 1: facts: List should have at least 1 item",
        ),
        (
            json.dumps(
                {
                    "cases": [
                        {
                            "name": "x",
                            "messages": [{"role": "robot", "content": "beep"}],
                            "facts": [{"kind": "id", "must_contain": ["a"]}],
                            "budgets": [10],
                        }
                    ]
                }
            ),
            "case 1 (x): message 1 has no role of system, user, assistant or tool",
        ),
    ],
)
def test_a_bad_case_file_is_one_line(tmp_path, content, line):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    with pytest.raises(IngestError, match=re.escape(line)):
        load_cases(bad)
    proc = run(tmp_path, "eval", "compaction", str(bad), "--json", "-")
    assert_one_error_line(proc)
    assert proc.stdout == ""


def test_a_call_still_waiting_for_its_result_is_taken_as_it_is(tmp_path, settings):
    from dreamer.eval.compaction import run_compaction_eval

    [case] = [c for c in load_cases(DEV) if c.name == "schema-migration"]
    pending = {"id": "call_99", "type": "function", "function": {"name": "run_sql", "arguments": "{}"}}
    messages = [*case.messages, {"role": "assistant", "content": None, "tool_calls": [pending]}]
    path = tmp_path / "pending.json"
    path.write_text(json.dumps({"cases": [{**case.model_dump(), "messages": messages, "budgets": [3800]}]}))
    [loaded] = load_cases(path)
    [row] = run_compaction_eval(settings, [loaded])["results"]
    assert (row["path"], row["model_calls"], row["facts_kept"]) == ("clear", 0, 1.0)


def test_with_an_endpoint_the_summaries_are_its_own(settings, result):
    from dreamer.eval.compaction import run_compaction_eval
    from dreamer.llm.scripted.compact import compact_script
    from dreamer.llm.scripted.server import ScriptedServer

    with ScriptedServer(compact_script) as server:  # an endpoint that answers as the stand-in does
        st = settings.model_copy(update={"llm_base_url": server.url, "llm_model": "stand-in"})
        r = run_compaction_eval(st, load_cases(DEV))
        asked = len(server.chat_requests())
    assert r["summariser"] == {"name": "llm:stand-in", "scripted": False}
    assert r["results"] == result["results"]
    for name in ("truncate", "summarise"):
        assert r["baselines"][name]["results"] == result["baselines"][name]["results"]
    assert r["overall"]["summary"]["summariser"] == "llm:stand-in"
    calls = [row["model_calls"] for rows in (r["results"], r["baselines"]["summarise"]["results"]) for row in rows]
    assert asked == sum(calls) == 16
