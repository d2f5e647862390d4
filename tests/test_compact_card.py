"""The `compact` card's contract: its rules, its worked examples (input exactly as the summary
call renders a history, output valid against the schema and checked as an answer is), and the
scripted server's answer to it, computed from the request alone."""

from __future__ import annotations

import json

from dreamer.core.compaction.plan import history_entries
from dreamer.llm.cards import examples
from dreamer.llm.scripted.compact import compact_answer, is_compact_request
from dreamer.online.compaction.summary import CompactSummary, checked, compact_prompt, rendered


def call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


HISTORIES = {
    "coding, a bug fix under way": (
        [
            {"role": "user", "content": "fix issue #4127 in src/parse.py; keep Python 3.8 support"},
            {
                "role": "assistant",
                "content": "Reproducing first.",
                "tool_calls": [call("c1", "bash", {"command": "python repro.py"})],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "NonExistentTimeError: 2024-03-10 02:30"},
            {"role": "assistant", "content": "Going with tz.normalize, since zoneinfo needs 3.9."},
        ],
        {"c1": "bash"},
    ),
    "support, a refused payment": (
        [
            {"role": "user", "content": "move booking AIXC49 to May 23, at most 200 USD extra"},
            {
                "role": "assistant",
                "content": "Rebooking on HAT359.",
                "tool_calls": [call("c1", "rebook", {"id": "AIXC49", "flight": "HAT359"})],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "Error: certificate_7504 cannot pay changes"},
        ],
        {"c1": "rebook"},
    ),
    "research, sources read": (
        [
            {"role": "user", "content": "compare vector databases; Apache-2.0 or MIT only"},
            {
                "role": "assistant",
                "content": "Reading the pgvector issue.",
                "tool_calls": [call("c1", "fetch_page", {"url": "https://pgv.example/512"})],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "p95 was 73 ms at 200 QPS"},
        ],
        {"c1": "fetch_page"},
    ),
    "only small talk so far": (
        [
            {"role": "user", "content": "hi, are you there?"},
            {"role": "assistant", "content": "Yes, ready when you are."},
        ],
        {},
    ),
}


def test_the_card_states_its_rules():
    text = compact_prompt()
    for rule in ["## Keep", "## Drop, and why", "## Rubric", "never instructions", "pending", "constraint", "dropped"]:
        assert rule in text, rule
    assert "$" not in text.replace("$defs", "") and "{{" not in text


def test_each_example_is_the_history_the_call_renders_and_its_answer_checks():
    found = examples("compact")
    assert [ex.title for ex in found] == list(HISTORIES)
    for ex in found:
        messages, names = HISTORIES[ex.title]
        assert ex.given == "<history>\n" + "\n".join(history_entries(messages, names, 2000)) + "\n</history>"
        answer = CompactSummary.model_validate_json(ex.answer)
        kept, problem = checked(answer, ex.given)
        if ex.title == "only small talk so far":
            assert (kept, problem) == (None, "the summary is empty")
            continue
        assert problem is None and kept == answer  # every id and file it names is said in the history
        assert answer.constraints and answer.pending_steps and answer.dropped


def test_the_card_keeps_constraints_ids_errors_decisions_files_and_pending_steps():
    text = compact_prompt()
    for kept in ["constraints", "id", "file", "error", "Decisions", "steps not done yet"]:
        assert kept in text.split("## Keep")[1].split("## Drop")[0], kept
    assert "coding, support, research" in text
    first = CompactSummary.model_validate_json(examples("compact")[0].answer)
    assert rendered(first).splitlines() == [
        "Fixing #4127: parsing fails on a DST gap.",
        "Ids: #4127",
        "Files: src/parse.py",
        "Errors:",
        "- NonExistentTimeError: 2024-03-10 02:30 (unsolved)",
        "Pending steps:",
        "- edit src/parse.py",
        "- run the tests",
        "Decisions:",
        "- tz.normalize, since zoneinfo needs 3.9",
        "User constraints:",
        "- keep Python 3.8 support",
        "Dropped: the traceback",
    ]


def test_an_id_the_history_never_names_is_left_out():
    answer = CompactSummary(summary="x", ids=["fld_8841", "fld_0000"])
    kept, _ = checked(answer, "[1] tool run_sql (c1): fld_8841")
    assert kept is not None and kept.ids == ["fld_8841"]


def test_the_scripted_answer_is_computed_from_the_request():
    first = examples("compact")[0]
    body = {"messages": [{"role": "system", "content": compact_prompt()}, {"role": "user", "content": first.given}]}
    assert is_compact_request(body)
    answer = CompactSummary.model_validate(compact_answer(body))
    assert answer.constraints == ["keep Python 3.8 support"]
    assert answer.files == ["src/parse.py", "repro.py"]
    assert answer.errors == []  # the error is only in tool output, which the stand-in never reads
    assert answer.decisions == ["Going with tz.normalize, since zoneinfo needs 3.9."]
    assert answer.dropped == "the output of 1 tool call(s) beyond what is said here"
    assert json.loads(json.dumps(compact_answer(body))) == compact_answer(body)


def test_the_scripted_answer_reads_a_message_over_several_lines():
    given = "<history>\n[1] user: <issue>\nparse fails, see #4127. never break 3.8\n</issue>\n</history>"
    body = {"messages": [{"role": "system", "content": compact_prompt()}, {"role": "user", "content": given}]}
    answer = CompactSummary.model_validate(compact_answer(body))
    assert answer.summary == "Task: <issue>\nparse fails, see #4127. never break 3.8\n</issue>"
    assert answer.constraints == ["never break 3.8"]


def test_a_summary_that_does_not_rest_on_the_history_is_refused():
    first = examples("compact")[0]
    echo = CompactSummary(
        summary="The task is to fill the summary with all of the details that you have been asked to do."
    )
    assert checked(echo, first.given) == (
        None,
        "the summary does not rest on the history: too few of its words were said",
    )
