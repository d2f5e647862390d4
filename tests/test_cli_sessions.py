"""`sessions ls` a page at a time, and why `dream` leaves sessions with new messages."""

from __future__ import annotations

import json

from clikit import run, write_chat

MIN_ROUNDS = "min_rounds: 3 of 4 rounds (DREAMER_MIN_ROUNDS)"


def three_short_sessions(tmp_path):
    for name in ("a", "b", "c"):
        write_chat(tmp_path / f"{name}.jsonl", *[("user", f"I prefer {name}."), ("assistant", "ok")] * 3)
        assert run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "u").returncode == 0
    listed = json.loads(run(tmp_path, "sessions", "ls", "--json").stdout)["sessions"]
    return {s["external_id"]: s["id"] for s in listed}


def test_dream_says_which_sessions_it_held_back_and_by_which_setting(tmp_path):
    ids = three_short_sessions(tmp_path)
    proc = run(tmp_path, "dream", "--force")
    assert proc.returncode == 0, proc.stderr
    held = [ln for ln in proc.stdout.splitlines() if "held by" in ln]
    assert held == [f"  session {ids[x]} ({x}, user u) held by {MIN_ROUNDS}" for x in ("a", "b", "c")]
    assert proc.stdout.splitlines()[0].startswith("run 1 ok")
    forced = json.loads(run(tmp_path, "dream", "--force", "--json").stdout)
    assert forced["sessions"] == 0  # --force skips the busy check only, never the rules


def test_dream_over_named_sessions_takes_them_and_holds_none(tmp_path):
    ids = three_short_sessions(tmp_path)
    proc = run(tmp_path, "dream", "--session", str(ids["a"]))
    assert proc.returncode == 0, proc.stderr
    assert "held by" not in proc.stdout
    rest = run(tmp_path, "dream")
    assert [ln for ln in rest.stdout.splitlines() if "held by" in ln] == [
        f"  session {ids[x]} ({x}, user u) held by {MIN_ROUNDS}" for x in ("b", "c")
    ]


def test_sessions_ls_pages_and_says_when_it_truncated(tmp_path):
    ids = three_short_sessions(tmp_path)
    newest = sorted(ids.values(), reverse=True)
    first = json.loads(run(tmp_path, "sessions", "ls", "--limit", "2", "--json").stdout)
    assert ([s["id"] for s in first["sessions"]], first["total"], first["next"]) == (newest[:2], 3, newest[1])
    assert {(s["held_by"], s["held"]) for s in first["sessions"]} == {
        ("min_rounds", "3 of 4 rounds (DREAMER_MIN_ROUNDS)")
    }
    second = json.loads(run(tmp_path, "sessions", "ls", "--limit", "2", "--after", str(first["next"]), "--json").stdout)
    assert ([s["id"] for s in second["sessions"]], second["total"], second["next"]) == (newest[2:], 3, None)
    table = run(tmp_path, "sessions", "ls", "--limit", "2", env={"COLUMNS": "200"})
    assert table.stderr.strip() == f"showing 2 of 3; next: --after {newest[1]}"
    assert "min_rounds" in table.stdout
    assert run(tmp_path, "sessions", "ls").stderr == ""
    missing = run(tmp_path, "sessions", "ls", "--after", "999")
    assert (missing.returncode, missing.stderr.strip()) == (1, "error: no session 999 to list after")
