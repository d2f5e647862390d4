"""`dreamer compact FILE --budget N` and `dreamer restore MARKER`, run as a user runs them: the
result fits, its markers are files that restore their bodies exactly, tokens are counted as the
API and the eval count them, and bad input is one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clikit import assert_one_error_line, run

from dreamer.core.compaction.policy import total_tokens
from dreamer.eval.compaction_cases import load_cases

NEW = Path(__file__).parent / "data" / "compaction-trajectories.json"


@pytest.fixture(scope="module")
def case():
    return next(c for c in load_cases(NEW) if c.name == "tau-airline-rebook")


def test_a_jsonl_chat_is_compacted_and_its_markers_restore(tmp_path, case):
    chat = tmp_path / "chat.jsonl"
    chat.write_text("".join(json.dumps(m) + "\n" for m in case.messages))
    proc = run(tmp_path, "compact", str(chat), "--budget", "500")
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert (answer["path"], answer["fits"], answer["counter"], answer["model_calls"]) == ("offload", True, "cl100k", 0)
    assert answer["tokens_before"] == total_tokens(case.messages) == 4447
    assert answer["tokens_after"] == total_tokens(answer["messages"]) <= 500
    assert proc.stderr.startswith("compact: offload, 4447 -> ")
    span = next(m["content"] for m in answer["messages"] if m["content"] and m["content"].startswith("[messages 2-"))
    back = run(tmp_path, "restore", span)
    assert back.returncode == 0, back.stderr
    first, last = map(int, re.search(r"messages (\d+)-(\d+)", span).groups())
    assert json.loads(back.stdout) == case.messages[first - 1 : last]
    files = sorted(p.stem for p in (tmp_path / "data" / "offloaded").iterdir())
    assert files == sorted(o["id"] for o in answer["offloaded"])


def test_chat_json_in_either_shape_and_an_output_file(tmp_path, case):
    (tmp_path / "list.json").write_text(json.dumps(case.messages))
    (tmp_path / "obj.json").write_text(json.dumps({"messages": case.messages}))
    for name in ("list.json", "obj.json"):
        proc = run(tmp_path, "compact", name, "--budget", "1800", "--out", f"{name}.out", "--offloads", "bodies")
        assert proc.returncode == 0, proc.stderr
        answer = json.loads((tmp_path / f"{name}.out").read_text())
        assert (answer["path"], answer["tokens_after"] <= 1800) == ("clear", True)
        oid = answer["offloaded"][0]["id"]
        back = run(tmp_path, "restore", oid, "--offloads", "bodies")
        assert back.stdout.rstrip("\n") == json.loads((tmp_path / "bodies" / f"{oid}.json").read_text())["content"]


@pytest.mark.parametrize(
    ("args", "content", "line"),
    [
        (["--budget", "0"], "[]", "error: --budget must be at least 1, not 0"),
        (["--budget", "lots"], "[]", "error: --budget must be a whole number of tokens, not 'lots'"),
        (["--budget", "9"], '{"a": 1}', 'error: chat.json: expected a list of messages or {"messages": [...]}'),
        (["--budget", "9"], "[]", "error: chat.json: no messages"),
        (
            ["--budget", "9"],
            '[{"role": "robot"}]',
            "error: chat.json: message 1 has no role of system, user, assistant or tool",
        ),
        (["--budget", "9"], '{"role": "user"}\n{oops', "error: chat.json: neither chat JSON nor JSONL"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, content, line):
    (tmp_path / "chat.json").write_text(content)
    proc = run(tmp_path, "compact", "chat.json", *args)
    assert_one_error_line(proc)
    assert proc.stderr.startswith(line) and proc.stdout == ""


def test_a_missing_file_or_marker_is_one_line(tmp_path):
    for args, line in (
        (["compact", "nothing.json", "--budget", "9"], "error: nothing.json: no such file"),
        (["restore", "ofl_0123abcd"], "error: no offloaded body ofl_0123abcd in "),
        (["restore", "hello"], "error: no offload id (ofl_...) in 'hello'"),
    ):
        proc = run(tmp_path, *args)
        assert_one_error_line(proc)
        assert proc.stderr.startswith(line)
