"""`sessions ls` a page at a time, and why `dream` leaves sessions with new messages."""

from __future__ import annotations

import json
import re

from clikit import run, write_chat

SHORT = (
    r"3 of 4 rounds \(DREAMER_MIN_ROUNDS\); a shorter session is due once quiet 21600 s, "
    r"active \d+ s ago \(DREAMER_SHORT_QUIET_SECONDS\)"
)
MIN_ROUNDS = "min_rounds: " + SHORT


def held_by_min_rounds(lines: list[str], ids: dict[str, int], names: tuple[str, ...]) -> bool:
    """Each of `names` held back as a short session, in order, and nothing else held."""
    held = [ln for ln in lines if "held by" in ln]
    pattern = [rf"  session {ids[x]} \({x}, user u\) held by {MIN_ROUNDS}" for x in names]
    return len(held) == len(pattern) and all(re.fullmatch(p, ln) for p, ln in zip(pattern, held))


def three_short_sessions(tmp_path):
    for name in ("a", "b", "c"):
        write_chat(tmp_path / f"{name}.jsonl", *[("user", f"I prefer {name}."), ("assistant", "ok")] * 3)
        assert run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "u").returncode == 0
    listed = json.loads(run(tmp_path, "sessions", "ls", "--json").stdout)["sessions"]
    return {s["external_id"]: s["id"] for s in listed}


def test_dream_says_which_sessions_it_held_back_and_by_which_setting(tmp_path):
    ids = three_short_sessions(tmp_path)
    proc = run(tmp_path, "dream")
    assert proc.returncode == 0, proc.stderr
    assert held_by_min_rounds(proc.stdout.splitlines(), ids, ("a", "b", "c")), proc.stdout
    assert proc.stdout.splitlines()[0].startswith("run 1 ok")
    forced = run(tmp_path, "dream", "--force")
    assert forced.stdout.startswith("run 2 ok (extractor: rules): 3 session(s)"), forced.stdout
    assert "held by" not in forced.stdout  # --force takes short sessions at once


def test_dream_over_named_sessions_takes_them_and_holds_none(tmp_path):
    ids = three_short_sessions(tmp_path)
    proc = run(tmp_path, "dream", "--session", str(ids["a"]))
    assert proc.returncode == 0, proc.stderr
    assert "held by" not in proc.stdout
    rest = run(tmp_path, "dream")
    assert held_by_min_rounds(rest.stdout.splitlines(), ids, ("b", "c")), rest.stdout


def test_sessions_ls_pages_and_says_when_it_truncated(tmp_path):
    ids = three_short_sessions(tmp_path)
    newest = sorted(ids.values(), reverse=True)
    first = json.loads(run(tmp_path, "sessions", "ls", "--limit", "2", "--json").stdout)
    assert ([s["id"] for s in first["sessions"]], first["total"], first["next"]) == (newest[:2], 3, newest[1])
    assert [s["held_by"] for s in first["sessions"]] == ["min_rounds", "min_rounds"]
    assert all(re.fullmatch(SHORT, s["held"]) for s in first["sessions"]), first
    second = json.loads(run(tmp_path, "sessions", "ls", "--limit", "2", "--after", str(first["next"]), "--json").stdout)
    assert ([s["id"] for s in second["sessions"]], second["total"], second["next"]) == (newest[2:], 3, None)
    table = run(tmp_path, "sessions", "ls", "--limit", "2", env={"COLUMNS": "200"})
    assert table.stderr.strip() == f"showing 2 of 3; next: --after {newest[1]}"
    assert "min_rounds" in table.stdout
    assert run(tmp_path, "sessions", "ls").stderr == ""
    missing = run(tmp_path, "sessions", "ls", "--after", "999")
    assert (missing.returncode, missing.stderr.strip()) == (1, "error: no session 999 to list after")
