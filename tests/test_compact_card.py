"""The `compact` card's contract: its rules, its worked examples (input exactly as the summary
call renders a history, output valid against the schema and checked as an answer is), and the
scripted server's answer to it, computed from the request alone."""

from __future__ import annotations

import json

from dreamer.core.compaction.plan import history_entries
from dreamer.llm.cards import examples
from dreamer.llm.scripted.compact import compact_answer, is_compact_request
from dreamer.online.compaction.summary import CompactSummary, checked, compact_prompt, rendered

HISTORY = [
    {
        "role": "user",
        "content": "add a nullable column for the invoice region, then backfill invoices. never drop the audit table.",
    },
    {
        "role": "assistant",
        "content": "I'll inspect the schema first.",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "run_sql", "arguments": '{"q": "select id from fields where name=\'region\'"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "id\\nfld_8841"},
    {
        "role": "assistant",
        "content": "Field fld_8841 exists. Going with a nullable column so old rows stay valid.",
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {
                    "name": "run_sql",
                    "arguments": '{"q": "alter table invoices add column region_id text null"}',
                },
            }
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "ALTER TABLE"},
]


def test_the_card_states_its_rules():
    text = compact_prompt()
    for rule in ["## Keep", "## Drop, and why", "## Rubric", "never instructions", "pending", "constraint", "dropped"]:
        assert rule in text, rule
    assert "$" not in text.replace("$defs", "") and "{{" not in text


def test_the_first_example_is_the_history_the_call_renders_and_its_answer_checks():
    first, empty = examples("compact")
    names = {"c1": "run_sql", "c2": "run_sql"}
    assert first.given == "<history>\n" + "\n".join(history_entries(HISTORY, names, 2000)) + "\n</history>"
    answer, problem = checked(CompactSummary.model_validate_json(first.answer), first.given)
    assert problem is None and answer is not None
    assert answer.ids == ["fld_8841"]  # "invoices.region_id" is not said as such: left out
    assert rendered(answer).splitlines()[0].startswith("Adding a nullable region column")
    assert checked(CompactSummary.model_validate_json(empty.answer), empty.given) == (None, "the summary is empty")


def test_an_id_the_history_never_names_is_left_out():
    answer = CompactSummary(summary="x", ids=["fld_8841", "fld_0000"])
    kept, _ = checked(answer, "[1] tool run_sql (c1): fld_8841")
    assert kept is not None and kept.ids == ["fld_8841"]


def test_the_scripted_answer_is_computed_from_the_request():
    first, _ = examples("compact")
    body = {"messages": [{"role": "system", "content": compact_prompt()}, {"role": "user", "content": first.given}]}
    assert is_compact_request(body)
    answer = CompactSummary.model_validate(compact_answer(body))
    assert answer.constraints == ["never drop the audit table."]
    assert answer.pending_steps == ["add a nullable column for the invoice region, then backfill invoices."]
    assert answer.ids == ["fld_8841"]
    assert answer.decisions == ["Going with a nullable column so old rows stay valid."]
    assert answer.dropped == "the output of 2 tool call(s) beyond what is said here"
    assert json.loads(json.dumps(compact_answer(body))) == compact_answer(body)


def test_a_summary_that_does_not_rest_on_the_history_is_refused():
    first, _ = examples("compact")
    echo = CompactSummary(
        summary="The task is to fill the summary with all of the details that you have been asked to do."
    )
    assert checked(echo, first.given) == (
        None,
        "the summary does not rest on the history: too few of its words were said",
    )
