"""The CLI as a user runs it: a subprocess, JSON on stdout, one error line on stderr."""

from __future__ import annotations

import json

import pytest
from clikit import assert_one_error_line, run, write_chat
from dreamkit import judged_by_word

from dreamer.llm.scripted.server import ScriptedServer


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
    assert (status["sessions"], status["messages"], status["memories"], status["schema_revision"]) == (1, 8, 2, "0016")


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


def test_runs_show_revert_dry_run_and_a_second_revert(tmp_path):
    chat = tmp_path / "c.jsonl"
    write_chat(chat, *[("user", "I prefer tea."), ("assistant", "ok")] * 4)
    run(tmp_path, "ingest", str(chat), "--user", "u")
    assert run(tmp_path, "dream").returncode == 0
    shown = json.loads(run(tmp_path, "runs", "show", "1", "--json").stdout)
    assert [(c["event"], c["user_id"], c["text"], c["reverted"]) for c in shown["changes"]] == [
        ("add", "u", "The user prefers tea.", False)
    ]
    assert shown["held"] == 0

    dry = run(tmp_path, "runs", "revert", "1", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert (json.loads(dry.stdout)["applied"], len(json.loads(dry.stdout)["changes"])) == (False, 1)
    assert len(json.loads(run(tmp_path, "memories", "ls", "--json").stdout)) == 1

    done = run(tmp_path, "runs", "revert", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "reverted 1 change(s) of run 1:"
    assert (
        done.stdout.splitlines()[-1] == "the sessions' cursors stay: `dreamer reprocess --session 1` dreams them again"
    )
    assert json.loads(run(tmp_path, "memories", "ls", "--json").stdout) == []
    assert "status:" not in next((tmp_path / "data" / "workspace").glob("*/DREAMS.md")).read_text()

    other = run(tmp_path, "runs", "revert", "1", "--user", "someone-else")
    assert (other.returncode, other.stdout) == (0, "nothing to revert: run 1 changed no memory of user someone-else\n")
    again = run(tmp_path, "runs", "revert", "1")
    assert (again.returncode, again.stdout) == (0, "nothing to revert: the 1 change(s) of run 1 were reverted before\n")
    accepted = run(tmp_path, "runs", "accept", "1")
    assert accepted.stdout == "nothing to accept: run 1 holds no change for review\n"
    for args in (("revert", "9"), ("accept", "9"), ("show", "9")):
        missing = run(tmp_path, "runs", *args)
        assert_one_error_line(missing)
        assert missing.stderr == "error: no run 9\n"


def test_a_revert_across_a_later_run_lists_the_conflict_and_force_goes_through(tmp_path):
    for name in ("c1", "c2"):
        write_chat(tmp_path / f"{name}.jsonl", *[("user", "I prefer tea."), ("assistant", "ok")] * 4)
        run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "u")
        assert run(tmp_path, "dream").returncode == 0  # run 1 adds the memory, run 2 merges into it
    [m] = json.loads(run(tmp_path, "memories", "ls", "--json").stdout)
    assert m["status"] == "verified"

    stopped = run(tmp_path, "runs", "revert", "1")

    assert_one_error_line(stopped)
    assert stopped.stderr == "error: run 1 not reverted: later changes touch its memories (--force reverts anyway)\n"
    assert f"  memory {m['id']}: merge by run 2 (event 2)" in stopped.stdout.splitlines()
    assert json.loads(run(tmp_path, "memories", "ls", "--json").stdout) == [m]

    forced = run(tmp_path, "runs", "revert", "1", "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(run(tmp_path, "memories", "ls", "--json").stdout) == []
    assert run(tmp_path, "reindex", "--check").stdout == "missing 0, extra 0, pending 0, stale 0\n"


def test_status_names_a_run_the_guard_held_and_runs_accept_applies_it(tmp_path):
    topics = ["breakfast drinks", "weekend hiking", "evening reading", "office music", "winter holidays"]
    with ScriptedServer(embed_dim=64) as srv:
        srv.set_script(judged_by_word("now"))
        env = {
            "DREAMER_LLM_BASE_URL": srv.url,
            "DREAMER_AMBIGUOUS_LOW": "0.5",
            "DREAMER_DUP_THRESHOLD": "0.99",
            "DREAMER_ENTRIES_PER_SESSION": "10",
        }
        for name, said in (("c1", "I prefer plain {}."), ("c2", "I prefer fancy {} now.")):
            write_chat(
                tmp_path / f"{name}.jsonl",
                *[p for t in topics for p in (("user", said.format(t)), ("assistant", "ok"))],
            )
            run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "u", env=env)
            dreamt = run(tmp_path, "dream", "--json", env=env)
            assert dreamt.returncode == 0, dreamt.stderr
        assert [json.loads(dreamt.stdout)[k] for k in ("added", "superseded", "held")] == [5, 0, 5]

        status = json.loads(run(tmp_path, "status", "--json", env=env).stdout)
        assert (status["review_required"], status["held_for_review"]) == (5, {"2": 5})
        assert (
            "held            run 2: 5 change(s) wait for review "
            "(`dreamer runs show 2`, then `runs accept 2` or `runs revert 2`)"
        ) in run(tmp_path, "status", env=env).stdout.splitlines()
        shown = run(tmp_path, "runs", "show", "2", env=env).stdout
        assert shown.count("held for review: would be superseded by") == 5

        accepted = run(tmp_path, "runs", "accept", "2", env=env)

    assert accepted.stdout.splitlines()[0] == "accepted 5 held change(s) of run 2"
    assert sorted(m["text"] for m in json.loads(run(tmp_path, "memories", "ls", "--json").stdout)) == sorted(
        f"The user prefers fancy {t} now." for t in topics
    )
    assert json.loads(run(tmp_path, "status", "--json").stdout)["held_for_review"] == {}
