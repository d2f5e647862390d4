"""Claude Code hooks as Claude Code runs them: `dreamer hook <event>` in a subprocess, its input
on stdin, a real transcript that grows between calls. Each message lands once, PreCompact
flushes a daily note through the scripted model, SessionStart prints the preferences, and a
broken store or a missing transcript still exits 0 with one log line. `dreamer hooks install`
merges with what is there."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from claudekit import CWD, SESSION, append_turns, hook_input
from clikit import run
from sqlmodel import col, select

from dreamer.core.models import Activity, DailyNote, Message, Session
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.agent_writes import remember
from dreamer.online.claude_hooks import hook_entries, merge_hooks
from dreamer.store import db
from dreamer.store.busy import activity_key
from dreamer.store.db import session_scope

FACT = "The user prefers answers in French."
ALICE = {"DREAMER_LOCAL_USER": "alice"}


def hook(tmp_path, event: str, stdin: str, **env):
    return run(tmp_path, "hook", event, input=stdin, env={**ALICE, **env})


def store(tmp_path):
    return db.make_engine(f"sqlite:///{tmp_path / 'data' / 'dreamer.db'}")


def messages(tmp_path) -> list[tuple[int, str, str]]:
    engine = store(tmp_path)
    try:
        with session_scope(engine) as s:
            rows = s.exec(select(Message.seq, Message.role, Message.content).order_by(col(Message.seq))).all()
    finally:
        engine.dispose()
    return [tuple(r) for r in rows]


def log_lines(tmp_path) -> list[str]:
    path = tmp_path / "data" / "logs" / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def home(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    return tmp_path


def test_session_start_prints_the_preferences(home):
    settings = Settings(_env_file=None, data_dir=home / "data", embedder="none", llm_base_url="")
    with Runtime.open(settings) as rt:
        remember(rt, Scope(user_id="alice"), FACT)
    proc = hook(home, "SessionStart", hook_input("SessionStart", home / "t.jsonl", source="startup"))
    assert (proc.returncode, proc.stderr) == (0, "")
    out = json.loads(proc.stdout)
    assert out["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert f"- {FACT}" in out["hookSpecificOutput"]["additionalContext"]

    someone_else = hook(home, "SessionStart", hook_input("SessionStart", home / "t.jsonl"), DREAMER_LOCAL_USER="bob")
    assert (someone_else.returncode, someone_else.stdout) == (0, "")  # bob has nothing to inject

    recalled = hook(
        home,
        "UserPromptSubmit",
        hook_input("UserPromptSubmit", home / "t.jsonl", prompt="Which language should answers be in?"),
        DREAMER_HOOK_RECALL_K="3",
    )
    context = json.loads(recalled.stdout)["hookSpecificOutput"]["additionalContext"]
    assert context.splitlines()[1:-1] == [f"- {FACT}"]


def test_each_message_of_a_growing_transcript_lands_once(home):
    transcript = home / "projects" / f"{SESSION}.jsonl"
    transcript.parent.mkdir()
    nxt = append_turns(transcript, ("user", "Plan a trip to Lyon."), ("assistant", "Gladly."))
    assert hook(home, "Stop", hook_input("Stop", transcript, stop_hook_active=False)).returncode == 0
    assert hook(home, "Stop", hook_input("Stop", transcript, stop_hook_active=False)).returncode == 0
    append_turns(transcript, ("user", "By train, please."), ("assistant", "Of course."), start=nxt)
    proc = hook(home, "SessionEnd", hook_input("SessionEnd", transcript, reason="exit"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert messages(home) == [
        (1, "user", "Plan a trip to Lyon."),
        (2, "assistant", "Gladly."),
        (3, "user", "By train, please."),
        (4, "assistant", "Of course."),
    ]
    engine = store(home)
    try:
        with session_scope(engine) as s:
            sess = s.exec(select(Session)).one()
            assert (sess.external_id, sess.user_id, sess.source, sess.project) == (
                SESSION,
                "alice",
                "claude-code",
                CWD.rsplit("/", 1)[1],
            )
            assert s.exec(select(Activity)).all() == []
    finally:
        engine.dispose()

    busy = hook(home, "UserPromptSubmit", hook_input("UserPromptSubmit", transcript, prompt="Hi"))
    assert (busy.returncode, busy.stdout) == (0, "")
    engine = store(home)
    try:
        with session_scope(engine) as s:
            assert [(a.key, a.in_flight) for a in s.exec(select(Activity)).all()] == [(activity_key("alice"), 0)]
    finally:
        engine.dispose()


def test_pre_compact_flushes_a_daily_note(home):
    transcript = home / f"{SESSION}.jsonl"
    append_turns(transcript, ("user", "We settled on the Lyon trip for May 3."), ("assistant", "Booked."))
    with ScriptedServer() as llm:
        llm.push(Reply.json({"notes": [{"text": "The Lyon trip is set for May 3.", "seqs": [1]}]}))
        proc = hook(
            home,
            "PreCompact",
            hook_input("PreCompact", transcript, trigger="auto", custom_instructions=""),
            DREAMER_LLM_BASE_URL=llm.url,
            DREAMER_LLM_MAX_RETRIES="0",
            DREAMER_HOOK_TIMEOUT_SECONDS="600",  # a slow machine still finishes
        )
        assert len(llm.chat_requests()) == 1
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    engine = store(home)
    try:
        with session_scope(engine) as s:
            notes = s.exec(select(DailyNote.text).where(DailyNote.position >= 0)).all()
    finally:
        engine.dispose()
    assert notes == ["The Lyon trip is set for May 3."]
    [daily] = (home / "data" / "workspace").glob("alice-*/memory/*.md")
    assert "The Lyon trip is set for May 3." in daily.read_text()
    assert [m[2] for m in messages(home)] == ["We settled on the Lyon trip for May 3.", "Booked."]


def test_a_missing_transcript_exits_0_with_one_log_line(home):
    proc = hook(home, "Stop", hook_input("Stop", home / "gone.jsonl"))
    assert (proc.returncode, proc.stdout) == (0, "")
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"dreamer hook Stop: transcript {home / 'gone.jsonl'} cannot be read: No such file")
    [logged] = log_lines(home)
    assert logged.endswith(line)


def garbage(home, name: str):
    """A file that is no transcript: a system file, 40 MB of random bytes, bytes without a line break."""
    if name == "system file":
        return Path("/etc/passwd") if Path("/etc/passwd").is_file() else Path(sys.executable)
    path = home / f"{name.replace(' ', '-')}.jsonl"
    size = 40 * 1024 * 1024 if name == "40 MB of garbage" else 4096
    data = random.Random(7).randbytes(size)
    path.write_bytes(data if name == "40 MB of garbage" else data.replace(b"\n", b" "))
    return path


@pytest.mark.parametrize("name", ["system file", "40 MB of garbage", "no line break"])
def test_a_transcript_that_is_no_transcript_exits_0_with_one_log_line(home, name):
    path = garbage(home, name)
    proc = hook(home, "Stop", hook_input("Stop", path))
    assert (proc.returncode, proc.stdout) == (0, "")
    [line] = proc.stderr.splitlines()
    assert line.startswith(f"dreamer hook Stop: transcript {path} is not a Claude Code transcript: "), line
    assert "Traceback" not in proc.stderr
    [logged] = log_lines(home)
    assert logged.endswith(line)
    assert messages(home) == []


@pytest.mark.parametrize(
    "stdin",
    [hook_input("SessionStart", "t.jsonl"), "not json"],
)
def test_a_broken_store_or_input_exits_0_with_one_log_line(home, stdin):
    (home / "broken.db").write_bytes(b"this is not a database" * 100)
    env = {"DREAMER_DATABASE_URL": f"sqlite:///{home / 'broken.db'}"} if stdin != "not json" else {}
    proc = hook(home, "SessionStart", stdin, **env)
    assert (proc.returncode, proc.stdout) == (0, "")
    [line] = proc.stderr.splitlines()
    assert line.startswith("dreamer hook SessionStart: ")
    assert "Traceback" not in proc.stderr
    assert [entry.split(" ", 1)[1] for entry in log_lines(home)] == [line]


def test_a_hook_gives_up_after_its_time(home):
    transcript = home / f"{SESSION}.jsonl"
    append_turns(transcript, ("user", "Note this down."), ("assistant", "Sure."))
    with ScriptedServer() as llm:
        llm.push(Reply.delay(30, then=Reply.json({"notes": []})))
        proc = hook(
            home,
            "PreCompact",
            hook_input("PreCompact", transcript, trigger="manual"),
            DREAMER_LLM_BASE_URL=llm.url,
            DREAMER_HOOK_TIMEOUT_SECONDS="1",
        )
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr.splitlines() == ["dreamer hook PreCompact: gave up after 1 s (DREAMER_HOOK_TIMEOUT_SECONDS)"]


# --------------------------------------------------------------------------- installing


def test_merge_keeps_other_hooks_and_is_idempotent():
    launcher = ["/usr/bin/python3", "-m", "dreamer", "--data-dir", "/srv/dreamer"]
    theirs = {"type": "command", "command": "notify-send done"}
    current = {
        "model": "opus",
        "hooks": {
            "Stop": [{"hooks": [theirs]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}],
        },
    }
    merged = merge_hooks(current, hook_entries(launcher, 20))
    assert merged["model"] == "opus"
    assert merged["hooks"]["PreToolUse"] == current["hooks"]["PreToolUse"]
    assert merged["hooks"]["Stop"] == [
        {"hooks": [theirs]},
        {
            "hooks": [
                {
                    "type": "command",
                    "command": "/usr/bin/python3 -m dreamer --data-dir /srv/dreamer hook Stop",
                    "timeout": 30,
                }
            ]
        },
    ]
    assert set(merged["hooks"]) == {
        "Stop",
        "PreToolUse",
        "SessionStart",
        "UserPromptSubmit",
        "PreCompact",
        "SessionEnd",
    }
    assert merge_hooks(merged, hook_entries(launcher, 20)) == merged
    moved = merge_hooks(merged, hook_entries(["dreamer", "--data-dir", "/elsewhere"], 20))
    assert moved["hooks"]["Stop"][1]["hooks"][0]["command"] == "dreamer --data-dir /elsewhere hook Stop"
    assert len(moved["hooks"]["Stop"]) == 2


def test_hooks_install_user_and_project(tmp_path):
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)
    theirs = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}, "theme": "dark"}
    (home / ".claude" / "settings.json").write_text(json.dumps(theirs))
    env = {"HOME": str(home)}
    first = run(tmp_path, "hooks", "install", "--user", env=env)
    assert first.returncode == 0, first.stderr
    written = json.loads((home / ".claude" / "settings.json").read_text())
    assert written["theme"] == "dark"
    assert written["hooks"]["Stop"][0] == theirs["hooks"]["Stop"][0]
    assert written["hooks"]["Stop"][1]["hooks"][0]["command"].endswith(f"--data-dir {tmp_path / 'data'} hook Stop")
    again = run(tmp_path, "hooks", "install", "--user", env=env)
    assert again.stdout.strip().endswith("dreamer's hooks are already there")
    assert json.loads((home / ".claude" / "settings.json").read_text()) == written

    project = tmp_path / "repo"
    project.mkdir()
    assert run(tmp_path, "hooks", "install", "--project", str(project), env=env).returncode == 0
    assert set(json.loads((project / ".claude" / "settings.json").read_text())["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "PreCompact",
        "Stop",
        "SessionEnd",
    }
    printed = json.loads(run(tmp_path, "hooks", "install", "--print", env=env).stdout)
    assert printed["hooks"]["PreCompact"][0]["hooks"][0]["command"].endswith("hook PreCompact")

    (project / ".claude" / "settings.json").write_text("{not json")
    broken = run(tmp_path, "hooks", "install", "--project", str(project), env=env)
    assert broken.returncode == 1
    assert broken.stderr.count("\n") == 1 and "nothing was written" in broken.stderr
    assert (project / ".claude" / "settings.json").read_text() == "{not json"
