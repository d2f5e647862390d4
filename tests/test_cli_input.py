"""Bad input at the CLI: one error line (or a usage error) and a non-zero exit, nothing written."""

from __future__ import annotations

import json

import pytest
from clikit import assert_one_error_line, run, write_chat
from typer.testing import CliRunner

from dreamer.cli import app

HUGE = "99999999999999999999999"


@pytest.fixture
def store(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    return tmp_path


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"DREAMER_RECALL_K": "abc"},
            "error: DREAMER_RECALL_K: Input should be a valid integer, unable to parse string as an integer",
        ),
        ({"DREAMER_RECALL_K": "0"}, "error: DREAMER_RECALL_K: Input should be greater than or equal to 1"),
        ({"DREAMER_RECALL_SEARCH": "foo"}, "error: DREAMER_RECALL_SEARCH: Input should be 'hybrid', 'dense' or 'text'"),
    ],
)
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
    assert (
        proc.stderr.strip()
        == f"error: cannot reach database sqlite:///{tmp_path / 'data' / 'dreamer.db'}: file is not a database"
    )


@pytest.mark.parametrize(
    "args",
    [
        ("sessions", "show", HUGE),
        ("runs", "show", HUGE),
        ("dream", "--session", HUGE),
        ("flush", "--session", HUGE),
        ("reprocess", "--session", HUGE, "--dry-run"),
        ("memories", "ls", "--limit", HUGE),
        ("sessions", "ls", "--limit", "-1"),
        ("checkpoints", "ls", "--limit", "0"),
        ("recall", "x", "--user", "u", "--k", HUGE),
        ("serve", "--port", "99999"),
        ("memories", "ls", "--status", "foo"),
        ("memories", "ls", "--kind", "foo"),
        ("memories", "forget", "abc", "--reason", " "),
    ],
)
def test_out_of_range_or_unknown_values_are_usage_errors(store, args):
    result = invoke(store, *args)
    assert result.exit_code == 2, result.output
    assert "Invalid value" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert json.loads(invoke(store, "runs", "ls", "--json").stdout) == []


def invoke(store, *args):
    """The CLI in this process (usage errors stop before anything is opened)."""
    return CliRunner().invoke(app, ["--data-dir", str(store / "data"), *args])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("dream", "--session", "9999"), "error: no session 9999"),
        (("dream", "--user", "nosuch"), "error: no sessions of user nosuch"),
    ],
)
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
    assert json.loads(run(tmp_path, "sessions", "ls", "--json").stdout)["sessions"] == []


def test_reading_a_store_never_made_creates_nothing(tmp_path):
    status = run(tmp_path, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["schema_revision"] is None
    proc = run(tmp_path, "sessions", "ls")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == f"error: no database at {tmp_path / 'data' / 'dreamer.db'}: run `dreamer init`"
    assert not (tmp_path / "data").exists()


def test_a_prefix_of_several_memory_ids_is_not_one_memory(store):
    from dreamer.core.models import Memory
    from dreamer.store import db
    from dreamer.store.db import session_scope

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


# --------------------------------------------------------------------------- what a command must not write


def stored_memory(store, mid: str = "c0bce0000001", text: str = "The user likes green tea."):
    """One memory written straight into the store; its id."""
    from dreamer.core.models import Memory
    from dreamer.store import db
    from dreamer.store.db import session_scope

    engine = db.make_engine(f"sqlite:///{store / 'data' / 'dreamer.db'}")
    with session_scope(engine) as s:
        s.add(Memory(id=mid, user_id="u", kind="preference", text=text, content_hash=mid))
    engine.dispose()
    return mid


def status_of(store, mid: str) -> str:
    return json.loads(run(store, "memories", "show", mid, "--json").stdout)["status"]


@pytest.mark.parametrize("given", ["%%%%%%0001", "______00", "c0bce_%"])
def test_a_memory_id_is_matched_as_written_not_as_a_pattern(store, given):
    mid = stored_memory(store)
    proc = run(store, "memories", "forget", given, "--reason", "typo")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == f"error: no memory {given}"
    assert status_of(store, mid) == "candidate"


def broken_index(store):
    """The index folder's place taken by a file: no command can open the index."""
    index = store / "data" / "index"
    if index.is_dir():
        import shutil

        shutil.rmtree(index)
    index.write_text("not an index")


def test_a_forget_the_index_cannot_take_is_not_made(store):
    mid = stored_memory(store)
    broken_index(store)
    proc = run(store, "memories", "forget", mid, "--reason", "asked to")
    assert_one_error_line(proc)
    assert proc.stderr.strip() == (
        f"error: the index folder {store / 'data' / 'index'} is a file: move it away "
        "(`dreamer reindex` rebuilds the index)"
    )
    assert status_of(store, mid) == "candidate"


def test_a_reprocess_the_index_cannot_take_rewinds_no_cursor(store):
    write_chat(store / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    assert run(store, "ingest", "--user", "bob", str(store / "a.jsonl")).returncode == 0
    assert run(store, "dream", env={"DREAMER_MIN_ROUNDS": "0"}).returncode == 0
    broken_index(store)

    proc = run(store, "reprocess", "--session", "1", "--yes")

    assert_one_error_line(proc)
    [cursor] = json.loads(run(store, "checkpoints", "ls", "--json").stdout)
    assert (cursor["processed_seq"], cursor["status"]) == (2, "ok")
    assert [r["status"] for r in json.loads(run(store, "runs", "ls", "--json").stdout)] == ["ok"]


def test_a_demo_that_cannot_open_the_index_ingests_nothing(store):
    broken_index(store)
    proc = run(store, "demo")
    assert_one_error_line(proc)
    assert json.loads(run(store, "sessions", "ls", "--json").stdout)["sessions"] == []


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:///:memory:", "sqlite:///file::memory:?uri=true"])
def test_an_in_memory_database_is_refused(tmp_path, url):
    write_chat(tmp_path / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    proc = run(tmp_path, "ingest", "--user", "bob", str(tmp_path / "a.jsonl"), env={"DREAMER_DATABASE_URL": url})
    assert_one_error_line(proc)
    assert proc.stderr.startswith("error: database URL sqlite://")
    assert " is an in-memory SQLite database, which keeps nothing after the command: " in proc.stderr


def test_a_read_only_database_is_one_line_and_keeps_what_it_had(store):
    write_chat(store / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    url = f"sqlite:///file:{store / 'data' / 'dreamer.db'}?mode=ro&uri=true"
    proc = run(store, "ingest", "--user", "bob", str(store / "a.jsonl"), env={"DREAMER_DATABASE_URL": url})
    assert_one_error_line(proc)
    assert proc.stderr.strip() == "error: the database refused: attempt to write a readonly database"
    assert json.loads(run(store, "sessions", "ls", "--json").stdout)["sessions"] == []


@pytest.mark.parametrize(
    "args",
    [
        ("memories", "ls", "--user", "\udcff"),
        ("recall", "tea\udcff", "--user", "u"),
        ("memories", "forget", "c0bce0000001", "--reason", "\udcff"),
    ],
)
def test_an_argument_that_is_not_utf8_is_one_line(store, args):
    mid = stored_memory(store)
    proc = run(store, *args)
    assert_one_error_line(proc)
    assert proc.stderr.strip() == (
        "error: '\\udcff' is not UTF-8 text, which dreamer can neither store nor show: give names and text in UTF-8"
    )
    assert status_of(store, mid) == "candidate"


def test_a_database_of_a_newer_schema_is_named_as_such(store):
    import sqlite3

    with sqlite3.connect(store / "data" / "dreamer.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    for command in (("init",), ("sessions", "ls")):
        proc = run(store, *command)
        assert_one_error_line(proc)
        assert proc.stderr.strip() == (
            f"error: database sqlite:///{store / 'data' / 'dreamer.db'} is at schema 9999, "
            "which this version of dreamer does not know (a newer one made it): run that "
            "version, or upgrade dreamer"
        )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("reprocess", "--session", "9999", "--yes"), "error: no session 9999"),
        (("reprocess", "--user", "nosuch", "--yes"), "error: no sessions of user nosuch"),
        (
            ("reprocess", "--since", "9999-12-31T23:59:59-01:00", "--dry-run"),
            "error: --since wants an ISO date such as 2024-05-01, got '9999-12-31T23:59:59-01:00'",
        ),
    ],
)
def test_a_reprocess_of_nothing_that_exists(store, args, message):
    proc = run(store, *args)
    assert_one_error_line(proc)
    assert proc.stderr.strip() == message


def test_a_broker_out_of_reach_is_one_line(store):
    write_chat(store / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    assert run(store, "ingest", "--user", "bob", str(store / "a.jsonl")).returncode == 0
    proc = run(
        store, "reprocess", "--all", "--via", "celery", "--yes", env={"DREAMER_BROKER_URL": "redis://127.0.0.1:1/0"}
    )
    assert_one_error_line(proc)
    assert proc.stderr.startswith("error: cannot reach the broker redis://127.0.0.1:1/0: ")


def test_a_pass_whose_model_fails_exits_non_zero(store):
    write_chat(store / "a.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))
    assert run(store, "ingest", "--user", "bob", str(store / "a.jsonl")).returncode == 0
    down = {"DREAMER_LLM_BASE_URL": "http://127.0.0.1:1/v1", "DREAMER_LLM_MAX_RETRIES": "0", "DREAMER_MIN_ROUNDS": "0"}

    dream = run(store, "dream", env=down)
    again = run(store, "reprocess", "--all", "--yes", env=down)

    for proc in (dream, again):  # the pass logs its warning for the session, then the command says it failed
        assert (proc.returncode, "Traceback" in proc.stderr) == (1, False)
    assert (
        dream.stderr.splitlines()[-1]
        == "error: the pass failed on 1 session(s): see `dreamer checkpoints ls --status failed`"
    )
    assert again.stderr.splitlines()[-1] == "error: 1 session(s) failed: see `dreamer checkpoints ls --status failed`"
    assert "1 failed" in again.stdout


def test_files_imported_together_are_all_stored_or_none(tmp_path):
    """The second file cannot be imported as asked (no user for a chat): the first, a LoCoMo
    file that names its own users, is not stored either."""
    conversation = {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "8:56 pm on 20 July, 2023",
            "session_1": [{"speaker": "Caroline", "dia_id": "D1:1", "text": "Back from the lake!"}],
        },
    }
    (tmp_path / "loco.json").write_text(json.dumps([conversation]))
    write_chat(tmp_path / "chat.jsonl", ("user", "I prefer tea."), ("assistant", "ok"))

    proc = run(tmp_path, "ingest", str(tmp_path / "loco.json"), str(tmp_path / "chat.jsonl"))

    assert_one_error_line(proc)
    assert (
        proc.stderr.strip()
        == f"error: {tmp_path / 'chat.jsonl'}: no user id given and the openai format does not carry one"
    )
    assert not (tmp_path / "data").exists()
    assert run(tmp_path, "ingest", str(tmp_path / "loco.json")).returncode == 0


def test_many_rejected_lines_are_counted_not_listed(tmp_path):
    lines = ['{"role": "user", "content": "I prefer tea."}'] + ["not json"] * 14
    (tmp_path / "a.jsonl").write_text("\n".join(lines) + "\n")
    proc = run(tmp_path, "ingest", "--user", "bob", str(tmp_path / "a.jsonl"))
    assert proc.returncode == 1
    rejected = [f"rejected {tmp_path / 'a.jsonl'}:{n}: invalid JSON: Expecting value at column 1" for n in range(2, 12)]
    assert proc.stderr.splitlines() == rejected + [f"{tmp_path / 'a.jsonl'}: and 4 more rejected"]


def test_a_data_dir_in_a_symbolic_link_loop_is_one_line(tmp_path):
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    for command in ("status", "init"):
        proc = run(tmp_path, "--data-dir", str(tmp_path / "loop1"), command)
        assert_one_error_line(proc)
        assert proc.stderr.strip() == (
            f"error: DREAMER_DATA_DIR: Value error, cannot be followed to a folder: "
            f"{tmp_path / 'loop1'} is in a loop of symbolic links"
        )


def test_text_the_output_cannot_show_names_the_encoding(store):
    mid = stored_memory(store, text="The user likes café au lait.")
    proc = run(store, "memories", "show", mid, env={"PYTHONIOENCODING": "ascii"})
    assert_one_error_line(proc)
    assert (
        proc.stderr.strip()
        == "error: '\\xe9' cannot be shown in the output's encoding (ascii): set PYTHONIOENCODING=utf-8"
    )
