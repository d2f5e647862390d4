"""The data folder is its owner's: messages stored with their secrets redacted unless
`DREAMER_STORE_RAW_MESSAGES` says otherwise, folders 0700 and files 0600 whatever the umask, and
nothing written while the disk has less free space than `DREAMER_MIN_FREE_MB`."""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import stat
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from clikit import assert_one_error_line, run, write_chat
from sqlmodel import select

from dreamer.core.errors import NoSpace
from dreamer.core.models import Message
from dreamer.core.private import HARD_FLOOR_MB, MB, check_free_space, space_problem
from dreamer.ingest.files import ingest_file
from dreamer.ingest.store import append_messages, record_messages
from dreamer.store.db import session_scope

SAID = "I prefer my password is hunter2 kept out of logs"
KEPT = "I prefer my password is [REDACTED:password] kept out of logs"
CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "shell", "arguments": '{"cmd": "export PGPASSWORD=Pw-99x"}'},
}


def stored(engine) -> list[tuple[str, object]]:
    with session_scope(engine) as s:
        return [(m.content, m.tool_calls) for m in s.exec(select(Message).order_by(Message.id)).all()]


def test_messages_are_stored_redacted_unless_kept_raw(engine, tmp_path):
    messages = [{"role": "user", "content": SAID}, {"role": "assistant", "content": None, "tool_calls": [CALL]}]
    record_messages(engine, "a", messages, user_id="u")
    append_messages(engine, "b", messages[:1], user_id="u")
    record_messages(engine, "c", messages[:1], user_id="u", raw=True)
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps(messages[0]) + "\n", encoding="utf-8")
    ingest_file(engine, path, user_id="u")
    again = ingest_file(engine, path, user_id="u")  # the same transcript: found stored, nothing added

    redacted_call = [{"id": "c1", "name": "shell", "arguments": '{"cmd": "export PGPASSWORD=[REDACTED:password]"}'}]
    assert stored(engine) == [(KEPT, None), ("", redacted_call), (KEPT, None), (SAID, None), (KEPT, None)]
    assert (again.added, again.skipped) == (0, 1)


def test_ingest_keeps_messages_raw_when_the_setting_says_so(tmp_path):
    write_chat(tmp_path / "c.jsonl", ("user", SAID), ("assistant", "ok"))
    run(tmp_path, "init")
    assert run(tmp_path, "ingest", "c.jsonl", "--user", "u", env={"DREAMER_STORE_RAW_MESSAGES": "1"}).returncode == 0
    write_chat(tmp_path / "d.jsonl", ("user", SAID), ("assistant", "ok"))
    assert run(tmp_path, "ingest", "d.jsonl", "--user", "u").returncode == 0
    with sqlite3.connect(tmp_path / "data" / "dreamer.db") as db:
        rows = db.execute("SELECT content FROM messages WHERE role = 'user' ORDER BY id").fetchall()
    assert rows == [(SAID,), (KEPT,)]


def mode(path: Path) -> str:
    return oct(stat.S_IMODE(path.stat().st_mode))


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_the_data_folder_and_what_dreamer_writes_in_it_are_the_owners(tmp_path, umask):
    write_chat(tmp_path / "c.jsonl", *[("user", "I prefer green tea in the morning."), ("assistant", "ok")] * 4)
    before = os.umask(umask)
    try:
        steps = [
            run(tmp_path, "init"),
            run(tmp_path, "ingest", "c.jsonl", "--user", "alice"),
            run(tmp_path, "flush", "--session", "1"),
            run(tmp_path, "dream"),
        ]
    finally:
        os.umask(before)
    assert [p.returncode for p in steps] == [0, 0, 0, 0], [p.stderr for p in steps]
    data = tmp_path / "data"
    [user] = (data / "workspace").glob("alice-*")
    [note] = (user / "memory").glob("*.md")
    folders = [data, data / "workspace", user, user / "memory", data / "index"]
    files = [data / "dreamer.db", user / "USER.md", user / "DREAMS.md", note]
    assert {str(p.relative_to(data)): mode(p) for p in folders + files} == {
        **{str(p.relative_to(data)): "0o700" for p in folders},
        **{str(p.relative_to(data)): "0o600" for p in files},
    }


def test_space_problem_names_the_folder_and_the_space_left():
    assert space_problem(Path("/srv/dreamer"), 5 * MB + MB // 2, 100) == (
        "only 5.5 MB free under /srv/dreamer (DREAMER_MIN_FREE_MB is 100): nothing was written;"
        " free some space or lower the setting"
    )
    assert space_problem(Path("/srv/dreamer"), 100 * MB, 100) is None
    assert space_problem(Path("/srv/dreamer"), 16 * MB, 0) is None  # 0: the hard floor only
    assert space_problem(Path("/srv/dreamer"), 0, 0) == (
        "only 0.0 MB free under /srv/dreamer, below the hard floor of 16 MB (DREAMER_MIN_FREE_MB cannot lower it):"
        " nothing was written; free some space"
    )


def test_check_free_space_looks_at_the_nearest_folder_there(tmp_path):
    check_free_space(tmp_path / "not" / "yet", 1)
    with pytest.raises(NoSpace) as caught:
        check_free_space(tmp_path / "not" / "yet", 10**12)
    assert re.fullmatch(
        rf"only [0-9.]+ MB free under {re.escape(str(tmp_path / 'not' / 'yet'))} \(DREAMER_MIN_FREE_MB is 1000000000000\):"
        r" nothing was written; free some space or lower the setting",
        str(caught.value),
    )


FULL = {"DREAMER_MIN_FREE_MB": str(10**12)}  # more than any disk here has free


def test_ingest_and_dream_stop_before_writing_when_the_disk_is_nearly_full(tmp_path):
    write_chat(tmp_path / "c.jsonl", *[("user", "I prefer green tea."), ("assistant", "ok")] * 4)
    line = rf"error: only [0-9.]+ MB free under {re.escape(str(tmp_path / 'data'))} \(DREAMER_MIN_FREE_MB is 1000000000000\): nothing was written; free some space or lower the setting"

    refused = run(tmp_path, "ingest", "c.jsonl", "--user", "alice", env=FULL)
    assert_one_error_line(refused)
    assert re.fullmatch(line, refused.stderr.strip())
    assert not (tmp_path / "data").exists()

    assert run(tmp_path, "ingest", "c.jsonl", "--user", "alice").returncode == 0
    dream = run(tmp_path, "dream", env=FULL)
    assert_one_error_line(dream)
    assert re.fullmatch(line, dream.stderr.strip())
    with sqlite3.connect(tmp_path / "data" / "dreamer.db") as db:
        assert db.execute("SELECT count(*) FROM dream_runs").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM memories").fetchone() == (0,)
    assert list((tmp_path / "data" / "workspace").iterdir()) == []
    assert not (tmp_path / "data" / "index").exists()


@pytest.mark.parametrize(
    "args, min_free",
    [(["reindex", "--check"], "100"), (["reindex", "--check"], "0"), (["reindex"], "0"), (["dream"], "0")],
)
def test_a_full_disk_is_refused_in_one_line_whatever_min_free_mb_says(tmp_path, monkeypatch, capsys, args, min_free):
    """On a full disk the store and the embedded index die with a bus error when written or
    mapped: every command stops before it opens them, even with DREAMER_MIN_FREE_MB=0."""
    write_chat(tmp_path / "c.jsonl", *[("user", "I prefer green tea."), ("assistant", "ok")] * 4)
    assert run(tmp_path, "ingest", "c.jsonl", "--user", "alice").returncode == 0
    from dreamer.cli import main

    data = tmp_path / "data"
    for name, value in {"DATA_DIR": str(data), "EMBEDDER": "none", "LLM_BASE_URL": "", "MIN_FREE_MB": min_free}.items():
        monkeypatch.setenv(f"DREAMER_{name}", value)
    full = SimpleNamespace(total=10**12, used=10**12 - MB // 2, free=MB // 2)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: full)
    monkeypatch.setattr(sys, "argv", ["dreamer", *args])
    with pytest.raises(SystemExit) as code:
        main()
    assert code.value.code == 1
    [line] = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    floor = f"below the hard floor of {HARD_FLOOR_MB} MB (DREAMER_MIN_FREE_MB cannot lower it)"
    expected = f"(DREAMER_MIN_FREE_MB is {min_free})" if args == ["dream"] and min_free != "0" else floor
    assert line.startswith(f"error: only 0.5 MB free under {data}") and expected in line, line
    assert not (data / "index").exists()
