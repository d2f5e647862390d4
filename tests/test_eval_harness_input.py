"""`dreamer eval locomo` and `dreamer bench` on bad input: one error before any work, nothing
outside a conversation's own folder touched, and a --json target checked before the run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dreamer.cli.measure  # noqa: F401  (registers eval and bench)
from dreamer.cli import app
from dreamer.cli.measure import check_json_target, write_json
from dreamer.core.errors import ConfigError, IngestError, NotFound
from dreamer.eval.harness import conversation_dir
from dreamer.eval.locomo import load_conversations

ENV = {"DREAMER_EMBEDDER": "none"}


def conv(sample_id: str = "c-1", **replace) -> dict:
    """A smallest valid LoCoMo conversation: two turns, one observation, one question."""
    item = {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I play the cello."},
                {"speaker": "Bob", "dia_id": "D1:2", "text": "I bake bread on Sundays."},
            ],
        },
        "observation": {"session_1_observation": {"Ann": [["Ann plays the cello.", "D1:1"]]}},
        "qa": [{"question": "What does Ann play?", "answer": "cello", "evidence": ["D1:1"], "category": 4}],
    }
    item.update(replace)
    return item


def with_body(**replace) -> dict:
    item = conv()
    item["conversation"] = {**item["conversation"], **replace}
    return item


def eval_cli(*args: str):
    return CliRunner().invoke(app, ["eval", "locomo", *args], env=ENV)


def write(path, document) -> str:
    path.write_text(document if isinstance(document, str) else json.dumps(document), encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------- folders


def test_conversation_folders_are_distinct_direct_children(tmp_path):
    ids = ["..", ".", "", "a/b", "a?b", "A?B", "../../etc", "tiny-1"]
    folders = [conversation_dir(tmp_path, i) for i in ids]
    assert [f.name for f in folders[:2]] == ["x-5ec1f7e700f3", "x-cdb4ee2aea69"]
    assert folders[-1].name == "tiny-1-698d199c3991"
    assert all(f.parent == tmp_path and f.name not in (".", "..") for f in folders)
    assert len(set(folders)) == len(ids)


def test_dot_sample_ids_never_touch_the_work_dir_or_its_parent(tmp_path):
    parent = tmp_path / "parent"
    work = parent / "work"
    work.mkdir(parents=True)
    (parent / "canary.txt").write_text("parent's")
    (work / "canary.txt").write_text("work's")
    ids = ["..", ".", "a/b", "a?b"]  # the last two were one folder "a_b" before
    path = write(tmp_path / "dots.json", [conv(i) for i in ids])
    res = eval_cli(path, "--memories", "turns", "--search", "text", "--work-dir", str(work), "--json", "-")
    assert res.exit_code == 0, res.output
    assert (parent / "canary.txt").read_text() == "parent's"
    assert (work / "canary.txt").read_text() == "work's"
    assert sorted(os.listdir(parent)) == ["canary.txt", "work"]
    assert sorted(os.listdir(work)) == [
        "a-b-c14cddc033f6",
        "a-b-c2a7b64a2d25",
        "canary.txt",
        "x-5ec1f7e700f3",
        "x-cdb4ee2aea69",
    ]
    assert all((conversation_dir(work, i) / "dreamer.db").is_file() for i in ids)
    result = json.loads(res.stdout)
    assert (result["n_questions"], result["memories"], result["recall_at"]["5"]) == (4, 8, 1.0)


def test_a_file_where_a_conversation_folder_goes_is_refused_not_deleted(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "x-5ec1f7e700f3").write_text("mine")  # where sample_id ".." goes
    res = eval_cli(write(tmp_path / "f.json", [conv("..")]), "--memories", "turns", "--work-dir", str(work))
    assert res.exit_code == 1
    assert isinstance(res.exception, ConfigError)
    assert str(res.exception) == f"{work / 'x-5ec1f7e700f3'} exists and is not a conversation folder: move it away"
    assert (work / "x-5ec1f7e700f3").read_text() == "mine"


# --------------------------------------------------------------------------- the input file

BAD_FILES = [
    ("", "the file is empty"),
    (" \n", "the file is empty"),
    ("{bad", "invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
    ("[]", "no conversation in the file"),
    ("5", "expected a JSON list of conversations"),
    ('{"foo": 1}', "conversation 1: expected an object with a 'conversation' object"),
    ([conv(), 7], "conversation 2: expected an object with a 'conversation' object"),
    ([{k: v for k, v in conv().items() if k != "sample_id"}], "conversation 1: 'sample_id' must be a non-empty string"),
    ([conv(["c"])], "conversation 1: sample_id must be a string"),
    ([conv(observation=[1])], "conversation 1 (c-1): 'observation' must be an object"),
    (
        [conv(observation={"session_1_observation": [1]})],
        "conversation 1 (c-1): 'observation' session_1_observation must be an object of speakers",
    ),
    (
        [conv(observation={"session_1_observation": {"Ann": 3}})],
        "conversation 1 (c-1): 'observation' session_1_observation Ann: expected a list of observations",
    ),
    ([conv(qa={"x": 1})], "conversation 1 (c-1): 'qa' must be a list of questions"),
    ([conv(qa=[1])], "conversation 1 (c-1): qa item 1 must be an object"),
    (
        [conv(qa=[{"question": "q", "category": 4, "evidence": 5}])],
        "conversation 1 (c-1): qa item 1: 'evidence' must be a list of dia_ids",
    ),
    (
        [conv(qa=[{"question": 5, "category": 1, "evidence": ["D1:1"]}])],
        "conversation 1 (c-1): qa item 1: 'question' must be a string",
    ),
    ([conv("x" * 256)], "conversation 1: sample_id longer than 255 characters"),
    ([with_body(speaker_b="Ann")], "conversation 1 (c-1): 'speaker_a' and 'speaker_b' must be two distinct names"),
    ([conv("c-1"), conv("c-2", observation=[1])], "conversation 2 (c-2): 'observation' must be an object"),
    ([conv("c-1"), conv("c-1")], "sample_id 'c-1' appears twice"),
    (
        [conv(qa=[{"question": "q", "category": 5, "evidence": ["D1:1"]}])],
        "no question to score (category 1-4, evidence naming a turn) in c-1",
    ),
]


@pytest.mark.parametrize("document,problem", BAD_FILES)
def test_a_bad_file_is_one_ingest_error_before_any_work(tmp_path, document, problem):
    path = write(tmp_path / "in.json", document)
    work = tmp_path / "work"
    res = eval_cli(path, "--memories", "turns", "--work-dir", str(work), "--json", str(tmp_path / "out.json"))
    assert res.exit_code == 1
    assert isinstance(res.exception, IngestError)
    assert str(res.exception) == f"{path}: {problem}"
    assert sorted(os.listdir(tmp_path)) == ["in.json"]  # no work dir, no JSON file


def test_the_entry_point_prints_one_line_and_exits_1(tmp_path):
    path = write(tmp_path / "in.json", "")
    proc = subprocess.run(
        [sys.executable, "-c", "from dreamer.cli import main; main()", "eval", "locomo", path],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV, "DREAMER_DATA_DIR": str(tmp_path / "d")},
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"error: {path}: the file is empty\n")


def test_an_unknown_conversation_is_not_found(tmp_path):
    path = write(tmp_path / "in.json", [conv("c-1"), conv("c-2")])
    res = eval_cli(path, "--conversations", "c-2,nosuch")
    assert res.exit_code == 1
    assert isinstance(res.exception, NotFound)
    assert str(res.exception) == f"{path}: no conversation nosuch (the file holds c-1, c-2)"


def test_a_work_dir_that_is_a_file_or_under_one_is_a_config_error(tmp_path):
    path = write(tmp_path / "in.json", [conv()])
    plain = tmp_path / "plain"
    plain.write_text("keep")
    for work, problem in [(plain, "is not a folder"), (plain / "sub", "cannot be made: Not a directory")]:
        res = eval_cli(path, "--memories", "turns", "--work-dir", str(work))
        assert res.exit_code == 1
        assert isinstance(res.exception, ConfigError)
        assert str(res.exception) == f"work dir {work} {problem}"
    assert plain.read_text() == "keep"


# --------------------------------------------------------------------------- --json PATH


def _bad_targets(tmp_path) -> list[tuple[str, str]]:
    (tmp_path / "folder").mkdir()
    (tmp_path / "plain").write_text("keep")
    return [
        (str(tmp_path / "missing" / "out.json"), f"folder {tmp_path / 'missing'} does not exist"),
        (str(tmp_path / "folder"), "is a folder"),
        (str(tmp_path / "plain" / "out.json"), f"{tmp_path / 'plain'} is not a folder"),
    ]


def test_eval_refuses_an_unwritable_json_target_before_running(tmp_path):
    path = write(tmp_path / "in.json", [conv()])
    work = tmp_path / "work"
    for target, problem in _bad_targets(tmp_path):
        res = eval_cli(path, "--memories", "turns", "--work-dir", str(work), "--json", target)
        assert res.exit_code == 1
        assert isinstance(res.exception, ConfigError)
        assert str(res.exception) == f"--json {target}: {problem}"
        assert not work.exists()
    assert (tmp_path / "plain").read_text() == "keep"


@pytest.mark.parametrize("which", ["recall", "pass", "consolidate", "flush"])
def test_bench_refuses_an_unwritable_json_target_before_running(tmp_path, which):
    for target, problem in _bad_targets(tmp_path):
        res = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "d"), "bench", which, "--small", "--json", target])
        assert res.exit_code == 1
        assert isinstance(res.exception, ConfigError)
        assert str(res.exception) == f"--json {target}: {problem}"
        assert res.stdout == ""  # no table: nothing ran


def test_the_json_check_leaves_no_file_and_keeps_an_existing_one(tmp_path):
    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text("previous")
    check_json_target(str(new))
    check_json_target(str(old))
    check_json_target("-")
    check_json_target(None)
    assert sorted(os.listdir(tmp_path)) == ["old.json"]
    assert old.read_text() == "previous"


def test_eval_writes_the_json_file(tmp_path):
    path = write(tmp_path / "in.json", [conv()])
    target = tmp_path / "out.json"
    target.write_text("previous")
    res = eval_cli(path, "--memories", "turns", "--search", "text", "--k", "2", "--json", str(target))
    assert res.exit_code == 0, res.output
    data = json.loads(target.read_text())
    assert (data["n_questions"], data["memories"], data["recall_at"], data["hit_at"]) == (1, 2, {"2": 1.0}, {"2": 1.0})
    assert sorted(os.listdir(tmp_path)) == ["in.json", "out.json"]


def test_a_json_file_that_cannot_be_written_at_the_end_goes_to_stdout(tmp_path, capsys):
    target = str(tmp_path / "gone" / "out.json")  # its folder vanished during the run
    with pytest.raises(ConfigError) as info:
        write_json({"n_questions": 3}, target)
    assert str(info.value) == f"--json {target}: cannot be written (No such file or directory); the result is on stdout"
    assert capsys.readouterr().out == '{\n  "n_questions": 3\n}\n'


def test_a_json_target_behind_a_symlink_is_written_through_it(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("previous")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    check_json_target(str(link))
    write_json({"n_questions": 3}, str(link))
    assert link.is_symlink()
    assert json.loads(real.read_text()) == {"n_questions": 3}


@pytest.mark.parametrize(
    "replace",
    [
        {"qa": [*conv()["qa"], {"question": 5, "category": 5, "evidence": 7}]},  # never scored
        {"observation": None},
        {"observation": {"session_1_observation": {"Ann": None, "Bob": []}}},
        {"observation": {"session_1_observation": None}},
    ],
)
def test_absent_or_unscored_parts_are_no_reason_to_refuse(tmp_path, replace):
    [loaded] = load_conversations(Path(write(tmp_path / "in.json", [conv(**replace)])))
    assert (loaded.sample_id, [q.text for q in loaded.questions]) == ("c-1", ["What does Ann play?"])


def test_a_session_that_is_not_a_list_of_turns_is_left_to_the_importer(tmp_path):
    item = with_body(session_2_date_time="2:00 pm on 9 May, 2023", session_2="text")
    [loaded] = load_conversations(Path(write(tmp_path / "in.json", [item])))
    assert loaded.turn_ids == {"D1:1", "D1:2"}
