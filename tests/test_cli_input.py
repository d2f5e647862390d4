"""Bad input at the CLI: one error line (or a usage error) and a non-zero exit, nothing written."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clikit import assert_one_error_line, run, write_chat
from dreamer.cli import app
from dreamer.cli import cabinet, online, ops, records  # noqa: F401  (register commands)

HUGE = "99999999999999999999999"


@pytest.fixture
def store(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    return tmp_path


@pytest.mark.parametrize(("env", "message"), [
    ({"DREAMER_RECALL_K": "abc"}, "error: DREAMER_RECALL_K: Input should be a valid integer, unable to parse string as an integer"),
    ({"DREAMER_RECALL_K": "0"}, "error: DREAMER_RECALL_K: Input should be greater than or equal to 1"),
    ({"DREAMER_RECALL_SEARCH": "foo"}, "error: DREAMER_RECALL_SEARCH: Input should be 'hybrid', 'dense' or 'text'"),
])
def test_a_bad_setting_is_one_line(tmp_path, env, message):
    proc = run(tmp_path, "status", env=env)
    assert_one_error_line(proc)
    assert proc.stderr.strip() == message


def test_a_data_dir_that_is_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    proc = run(tmp_path, "--data-dir", str(tmp_path / "afile"), "init")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == f"error: File exists: {tmp_path / 'afile'}"


def test_an_empty_data_dir_option(tmp_path):
    proc = run(tmp_path, "--data-dir", "", "status")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == "error: --data-dir is empty: give a folder"


def test_a_database_file_that_is_not_a_database(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "dreamer.db").write_text("hello, not a database\n" * 100)
    proc = run(tmp_path, "status")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == f"error: cannot reach database sqlite:///{tmp_path / 'data' / 'dreamer.db'}: file is not a database"


@pytest.mark.parametrize("args", [
    ("sessions", "show", HUGE), ("runs", "show", HUGE), ("dream", "--session", HUGE), ("flush", "--session", HUGE),
    ("reprocess", "--session", HUGE, "--dry-run"), ("memories", "ls", "--limit", HUGE), ("sessions", "ls", "--limit", "-1"),
    ("checkpoints", "ls", "--limit", "0"), ("recall", "x", "--user", "u", "--k", HUGE), ("serve", "--port", "99999"),
    ("memories", "ls", "--status", "foo"), ("memories", "ls", "--kind", "foo"),
    ("memories", "forget", "abc", "--reason", " "),
])
def test_out_of_range_or_unknown_values_are_usage_errors(store, args):
    result = invoke(store, *args)
    assert result.exit_code == 2, result.output
    assert "Invalid value" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert json.loads(invoke(store, "runs", "ls", "--json").stdout) == []


def invoke(store, *args):
    """The CLI in this process (usage errors stop before anything is opened)."""
    return CliRunner().invoke(app, ["--data-dir", str(store / "data"), *args])


@pytest.mark.parametrize(("args", "message"), [
    (("dream", "--session", "9999"), "error: no session 9999"),
    (("dream", "--user", "nosuch"), "error: no sessions of user nosuch"),
])
def test_a_pass_over_sessions_that_are_not_there(store, args, message):
    proc = run(store, *args)
    assert_one_error_line(proc)
    assert proc.stderr.strip() == message
    assert json.loads(run(store, "runs", "ls", "--json").stdout) == []


def test_one_unreadable_file_imports_none(tmp_path):
    write_chat(tmp_path / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    proc = run(tmp_path, "ingest", "--user", "bob", str(tmp_path / "a.jsonl"), str(tmp_path / "nosuch.jsonl"))
    assert_one_error_line(proc)
    assert proc.stderr.strip() == f"error: cannot read {tmp_path / 'nosuch.jsonl'}: No such file or directory"
    assert not (tmp_path / "data").exists()


def test_a_file_with_no_session_in_its_format(tmp_path):
    write_chat(tmp_path / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    (tmp_path / "empty.jsonl").write_text("")
    proc = run(tmp_path, "ingest", "--user", "bob", "--format", "claude-code", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"{tmp_path / 'a.jsonl'}: no session found as claude-code"
    proc = run(tmp_path, "ingest", "--user", "bob", str(tmp_path / "empty.jsonl"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"{tmp_path / 'empty.jsonl'}: no session found as openai"
    assert json.loads(run(tmp_path, "sessions", "ls", "--json").stdout) == []


def test_reading_a_store_never_made_creates_nothing(tmp_path):
    status = run(tmp_path, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["schema_revision"] is None
    proc = run(tmp_path, "sessions", "ls")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == f"error: no database at {tmp_path / 'data' / 'dreamer.db'}: run `dreamer init`"
    assert not (tmp_path / "data").exists()


def test_a_prefix_of_several_memory_ids_is_not_one_memory(store):
    from dreamer import db
    from dreamer.db import session_scope
    from dreamer.models import Memory

    engine = db.make_engine(f"sqlite:///{store / 'data' / 'dreamer.db'}")
    with session_scope(engine) as s:
        for mid in ("abcdef01", "abcdef02"):
            s.add(Memory(id=mid, user_id="u", kind="preference", text=f"The user likes {mid}.", content_hash=mid))
    engine.dispose()
    proc = run(store, "memories", "show", "abcdef")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == "error: abcdef starts the ids of several memories: give more of it"
    shown = run(store, "memories", "show", "abcdef02", "--json")
    assert json.loads(shown.stdout)["text"] == "The user likes abcdef02."
