"""`dreamer demo` in an empty folder, as a user first runs it: with no model (rules) and with a
model that answers, exit 0 and the memories; with an endpoint that fails every request, exit 1
and one line on stderr saying why. And `pass_failure`, the reason it gives."""

from __future__ import annotations

import pytest
from clikit import run
from dreamkit import extraction_script

from dreamer.core.models import DreamRun
from dreamer.engine.runs import pass_failure
from dreamer.llm.scripted.server import Reply, ScriptedServer

QUICK_RETRIES = {"DREAMER_LLM_RETRY_BASE": "0", "DREAMER_LLM_RETRY_CAP": "0"}
HTTP_500 = "TransientLLMError: LLM unavailable after 5 attempts, HTTP 500: scripted error 500"
LEARNED = [
    "The user prefers quiet boutique hotels over big chains, and I'm vegetarian, so restaurant tips should keep that "
    "in mind.",
    "The user prefers quiet boutique hotels over big chains, but tonight it's about food: somewhere calm, not loud.",
]


def demo(tmp_path, llm_url: str = ""):
    return run(tmp_path, "demo", env={"DREAMER_LLM_BASE_URL": llm_url, **QUICK_RETRIES})


def memories(stdout: str) -> list[str]:
    """The texts of the memory lines the demo printed (`id  user  [kind, status, n session(s)]  text`)."""
    return [line.split("]  ", 1)[1] for line in stdout.splitlines() if "  demo  [" in line]


def test_the_demo_without_a_model_exits_0(tmp_path):
    proc = demo(tmp_path)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert "extractor: rules (no LLM configured; set DREAMER_LLM_BASE_URL to use a model)" in proc.stdout
    assert "run 1 ok (extractor: rules): 3 session(s), 27 message(s)" in proc.stdout
    assert "The user is vegetarian." in memories(proc.stdout)


def test_the_demo_with_a_model_that_answers_exits_0(tmp_path):
    with ScriptedServer(extraction_script(), embed_dim=64) as llm:
        proc = demo(tmp_path, llm.url)
        calls = len(llm.chat_requests())
    assert (proc.returncode, proc.stderr) == (0, "")
    assert calls == 2  # the two agent sessions in one call, the coding session in another
    assert (
        "run 1 ok (extractor: llm:gpt-4o-mini): 3 session(s), 27 message(s), 2 candidate(s) -> 2 added" in proc.stdout
    )
    assert memories(proc.stdout) == LEARNED


def test_the_demo_against_a_failing_endpoint_exits_1_saying_why(tmp_path):
    with ScriptedServer(lambda body: Reply.error(500), embed_dim=64) as llm:
        proc = demo(tmp_path, llm.url)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert memories(proc.stdout) == []
    assert proc.stderr.splitlines()[-1] == (
        "error: the pass stopped, 2 session(s) failed: circuit open: 3 consecutive LLM failures, last: " + HTTP_500
    )


@pytest.mark.parametrize(
    ("run", "errors", "why"),
    [
        (DreamRun(status="ok", failed_sessions=0), [], None),
        (DreamRun(status="partial", error="1 session(s) left due: busy", failed_sessions=0), [], None),
        (
            DreamRun(status="partial", failed_sessions=2),
            ["ValueError: bad\n answer", "ValueError: bad answer", "LLMError: refused"],
            "the pass partial, 2 session(s) failed: ValueError: bad answer; LLMError: refused",
        ),
        (
            DreamRun(status="stopped", error="circuit open: last: HTTP 500", failed_sessions=1),
            ["HTTP 500"],
            "the pass stopped, 1 session(s) failed: circuit open: last: HTTP 500",
        ),
        (
            DreamRun(status="stopped", error="token budget spent", failed_sessions=0),
            [],
            "the pass stopped, 0 session(s) failed: token budget spent",
        ),
        (DreamRun(status="failed"), [], "the pass failed, 0 session(s) failed: no reason recorded"),
    ],
)
def test_pass_failure_names_the_runs_reason_then_the_sessions_new_ones(run, errors, why):
    assert pass_failure(run, errors) == why


def test_the_demo_prints_each_rejection_with_its_reason(tmp_path):
    yacht = {"text": "The user owns a yacht moored in Monaco.", "seqs": [1], "importance": 0.6, "tags": []}

    def script(body: dict) -> Reply:
        return Reply.json({"preference": [yacht], "profile": [yacht]})

    with ScriptedServer(script, embed_dim=64) as llm:
        proc = demo(tmp_path, llm.url)
    assert proc.returncode == 0, proc.stderr
    rejected = [line for line in proc.stdout.splitlines() if line.startswith("  rejected (")]
    assert rejected, proc.stdout
    assert all(": 'The user owns a yacht moored in Monaco.': ungrounded" in line for line in rejected), rejected
    assert "The user owns a yacht moored in Monaco." not in memories(proc.stdout)
