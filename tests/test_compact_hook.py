"""The PreCompact hook records what a compaction would clear: each old tool output of the
Claude Code transcript becomes an offloaded body (once, redacted) that `restore_offloaded`
gives back in the hook's scope, and the hook still exits 0 and prints nothing."""

from __future__ import annotations

import json

from claudekit import SESSION, hook_input, turn
from clikit import run
from sqlmodel import select

from dreamer.core.models import OffloadedBody
from dreamer.store import db
from dreamer.store.db import session_scope

LOG = "2026-11-30 build step {k} ok; artefact digest sha256:77ab{k:04d}; " * 60  # about 1.3k tokens


def tool_turns(n: int, k: int) -> list[dict]:
    """Lines n, n+1: an assistant tool_use and the user line carrying its tool_result."""
    use = turn(n, "assistant", "")
    use["message"]["content"] = [{"type": "tool_use", "id": f"toolu_{k}", "name": "Bash", "input": {"command": "make"}}]
    result = turn(n + 1, "user", "")
    body = LOG.format(k=k) + ("password=hunter2-very-secret-value" if k == 0 else "")
    result["message"]["content"] = [{"type": "tool_result", "tool_use_id": f"toolu_{k}", "content": body}]
    return [use, result]


def write_transcript(path, rounds: int) -> None:
    lines = [turn(1, "user", "Build the release and keep the logs.")]
    for k in range(rounds):
        lines += tool_turns(2 + 2 * k, k)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def offloaded(home) -> list[tuple[str | None, str | None, str]]:
    engine = db.make_engine(f"sqlite:///{home / 'data' / 'dreamer.db'}")
    try:
        with session_scope(engine) as s:
            rows = s.exec(select(OffloadedBody).order_by(OffloadedBody.tool_call_id)).all()
            return [(r.session_id, r.tool_call_id, r.body) for r in rows]
    finally:
        engine.dispose()


def test_pre_compact_records_what_compaction_would_drop(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    transcript = tmp_path / f"{SESSION}.jsonl"
    write_transcript(transcript, 5)
    env = {"DREAMER_LOCAL_USER": "alice", "DREAMER_HOOK_TIMEOUT_SECONDS": "600"}
    for _ in range(2):  # a second PreCompact records nothing twice
        proc = run(tmp_path, "hook", "PreCompact", input=hook_input("PreCompact", transcript, trigger="auto"), env=env)
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    rows = offloaded(tmp_path)
    assert [(r[0], r[1]) for r in rows] == [(SESSION, "toolu_0"), (SESSION, "toolu_1")]  # the 3 recent rounds stay
    assert rows[1][2] == LOG.format(k=1)
    assert "hunter2-very-secret-value" not in rows[0][2] and "[REDACTED:" in rows[0][2]
