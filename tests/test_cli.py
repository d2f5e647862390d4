"""The CLI as a user runs it: a subprocess, JSON on stdout, one error line on stderr."""

from __future__ import annotations

import json

import pytest
from clikit import assert_one_error_line, run, write_chat


def test_ingest_dream_and_json_listings(tmp_path):
    chat = tmp_path / "c1.jsonl"
    write_chat(
        chat,
        ("user", "I prefer short answers."),
        ("assistant", "ok"),
        ("user", "My name is Ada."),
        ("assistant", "hi"),
        ("user", "thanks"),
        ("assistant", "np"),
        ("user", "bye"),
        ("assistant", "bye"),
    )
    ing = run(tmp_path, "ingest", str(chat), "--user", "ada", "--json")
    assert ing.returncode == 0, ing.stderr
    assert json.loads(ing.stdout) == [
        {"path": str(chat), "format": "openai", "sessions": 1, "added": 8, "skipped": 0, "rejections": []}
    ]

    sessions = json.loads(run(tmp_path, "sessions", "ls", "--json").stdout)["sessions"]
    assert [(s["external_id"], s["user_id"], s["messages"], s["processed_seq"]) for s in sessions] == [
        ("c1", "ada", 8, 0)
    ]

    first = run(tmp_path, "dream", "--json")
    assert first.returncode == 0, first.stderr
    assert (json.loads(first.stdout)["extractor"], json.loads(first.stdout)["added"]) == ("rules", 2)
    mems = json.loads(run(tmp_path, "memories", "ls", "--json").stdout)
    assert sorted(m["text"] for m in mems) == ["The user prefers short answers.", "The user's name is Ada."]
    files = sorted((p.name, p.read_text()) for p in (tmp_path / "data" / "workspace").rglob("*.md"))

    second = json.loads(run(tmp_path, "dream", "--json").stdout)
    assert (second["sessions"], second["added"], second["merged"]) == (0, 0, 0)
    assert len(json.loads(run(tmp_path, "memories", "ls", "--json").stdout)) == 2
    assert sorted((p.name, p.read_text()) for p in (tmp_path / "data" / "workspace").rglob("*.md")) == files

    runs = json.loads(run(tmp_path, "runs", "ls", "--json").stdout)
    assert [r["id"] for r in runs] == [2, 1]
    shown = json.loads(run(tmp_path, "memories", "show", mems[0]["id"], "--json").stdout)
    assert [e["event"] for e in shown["history"]] == ["add"]
    status = json.loads(run(tmp_path, "status", "--json").stdout)
    assert (status["sessions"], status["messages"], status["memories"], status["schema_revision"]) == (1, 8, 2, "0005")


def test_forget_removes_from_listing_and_markdown(tmp_path):
    chat = tmp_path / "c.jsonl"
    write_chat(chat, *[("user", "I prefer tea."), ("assistant", "ok")] * 4)
    run(tmp_path, "ingest", str(chat), "--user", "u")
    run(tmp_path, "dream")
    [m] = json.loads(run(tmp_path, "memories", "ls", "--json").stdout)
    forgot = run(tmp_path, "memories", "forget", m["id"], "--reason", "wrong")
    assert forgot.returncode == 0, forgot.stderr
    assert json.loads(run(tmp_path, "memories", "ls", "--json").stdout) == []
    assert [x["status"] for x in json.loads(run(tmp_path, "memories", "ls", "--status", "all", "--json").stdout)] == [
        "forgotten"
    ]
    assert all(m["id"] not in p.read_text() for p in (tmp_path / "data" / "workspace").rglob("*.md"))


def test_ingest_reports_rejected_lines_and_exits_non_zero(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"role": "user", "content": "fine"}\nnot json\n{"role": "robot", "content": "x"}\n')
    proc = run(tmp_path, "ingest", str(bad), "--user", "u")
    assert proc.returncode == 1
    assert f"{bad}:2:" in proc.stderr and f"{bad}:3:" in proc.stderr
    assert "Traceback" not in proc.stderr
    sessions = json.loads(run(tmp_path, "sessions", "ls", "--json").stdout)["sessions"]
    assert [s["messages"] for s in sessions] == [1]


@pytest.mark.parametrize(
    "args,needle",
    [
        (["ingest", "/no/such/file.jsonl", "--user", "u"], "/no/such/file.jsonl"),
        (["ingest", "x.jsonl", "--format", "yaml", "--user", "u"], "unknown format"),
        (["sessions", "show", "999"], "no session 999"),
        (["memories", "show", "nope"], "no memory nope"),
        (["runs", "show", "42"], "no run 42"),
    ],
)
def test_expected_failures_are_one_line(tmp_path, args, needle):
    run(tmp_path, "init")
    proc = run(tmp_path, *args)
    assert_one_error_line(proc)
    assert needle in proc.stderr


def test_uninitialised_store_and_unreachable_database(tmp_path):
    proc = run(tmp_path, "sessions", "ls")
    assert_one_error_line(proc)
    assert "dreamer init" in proc.stderr
    proc = run(tmp_path, "status", env={"DREAMER_DATABASE_URL": "postgresql+psycopg://x:pw@127.0.0.1:1/db"})
    assert_one_error_line(proc)
    assert "cannot reach database" in proc.stderr and ":pw@" not in proc.stderr
