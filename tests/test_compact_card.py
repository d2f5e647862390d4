"""The `compact` card's contract: its rules, its worked examples (input exactly as the summary
call renders a history, output valid against the schema and checked as an answer is), and the
scripted server's answer to it, computed from the request alone."""

from __future__ import annotations

import json

from dreamer.core.compaction.plan import history_entries
from dreamer.llm.cards import examples
from dreamer.llm.scripted.compact import compact_answer, is_compact_request
from dreamer.online.compaction.summary import CompactSummary, checked, compact_prompt, rendered


def tool_history(task: str, say: str, tool: str, args: dict, result: str, *after: str) -> tuple[list, dict]:
    """A user's task, the assistant's one tool call (id ``c1``) and its result, then what the
    assistant said after; with the call's tool name by id."""
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": json.dumps(args)}}
    messages = [
        {"role": "user", "content": task},
        {"role": "assistant", "content": say, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
        *({"role": "assistant", "content": text} for text in after),
    ]
    return messages, {"c1": tool}


HISTORIES = {
    "coding, a bug fix under way": tool_history(
        "fix issue #4127 in src/parse.py; keep Python 3.8 support",
        "Reproducing first.",
        "bash",
        {"command": "python repro.py"},
        "NonExistentTimeError: 2024-03-10 02:30",
        "Going with tz.normalize, since zoneinfo needs 3.9.",
    ),
    "support, a refused payment": tool_history(
        "move booking AIXC49 to May 23, at most 200 USD extra",
        "Rebooking on HAT359.",
        "rebook",
        {"id": "AIXC49", "flight": "HAT359"},
        "Error: certificate_7504 cannot pay changes",
    ),
    "research, sources read": tool_history(
        "compare vector databases; Apache-2.0 or MIT only",
        "Reading the pgvector issue.",
        "fetch_page",
        {"url": "https://pgv.example/512"},
        "p95 was 73 ms at 200 QPS",
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
