"""First use without `dreamer init`, as a user meets it: each command that brings data in or
serves (`ingest`, `hook`, `mcp`, `serve`, `run`) makes the store in an empty folder, then does
its work. Processes that make one store at the same moment take turns, on SQLite and on
PostgreSQL: every one succeeds and the schema is whole."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import anyio
import httpx
import pytest
from claudekit import append_turns, hook_input
from clikit import run, write_chat
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from onlinekit import free_port
from sqlalchemy import text
from sqlmodel import col, select

from dreamer.core.models import DreamRun, Memory, Message, Session
from dreamer.store import db
from dreamer.store.db import session_scope

FACT = "The user prefers window seats on long trains."


def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'data' / 'dreamer.db'}"


def env_of(tmp_path, **extra: str) -> dict[str, str]:
    """The environment `clikit.run` gives, for a process the test starts itself."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    env.update(
        {
            "DREAMER_DATA_DIR": str(tmp_path / "data"),
            "DREAMER_EMBEDDER": "none",
            "DREAMER_LLM_BASE_URL": "",
            "DREAMER_LOCAL_USER": "alice",
            "PYTHONPATH": os.pathsep.join(sys.path),
            **extra,
        }
    )
    return env


def stored(url: str) -> tuple[str | None, list[tuple[str, str, str]]]:
    """The store's schema revision, and its messages as (session, role, text), by session and seq."""
    engine = db.make_engine(url)
    try:
        with session_scope(engine) as s:
            rows = s.exec(
                select(Session.external_id, Message.role, Message.content)
                .join(Session, col(Session.id) == col(Message.session_id))
                .order_by(col(Session.external_id), col(Message.seq))
            ).all()
        return db.current_revision(engine), [tuple(r) for r in rows]
    finally:
        engine.dispose()


def wait_for(check, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    """SIGTERM, then the exit status and stderr."""
    try:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err


# --------------------------------------------------------------------------- each entry point


def test_ingest_makes_the_store(tmp_path):
    write_chat(tmp_path / "a.jsonl", ("user", "I prefer tea."), ("assistant", "Noted."))
    proc = run(tmp_path, "ingest", "--user", "alice", str(tmp_path / "a.jsonl"))
    assert (proc.returncode, proc.stderr) == (0, "")
    assert stored(sqlite_url(tmp_path)) == (db.HEAD, [("a", "user", "I prefer tea."), ("a", "assistant", "Noted.")])


def test_a_hook_makes_the_store_and_records_the_transcript(tmp_path):
    transcript = tmp_path / "t.jsonl"
    append_turns(transcript, ("user", "Plan a trip to Lyon."), ("assistant", "Gladly."), session="s-1")
    stdin = hook_input("Stop", transcript, session_id="s-1", stop_hook_active=False)
    proc = run(tmp_path, "hook", "Stop", input=stdin, env={"DREAMER_LOCAL_USER": "alice"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert not (tmp_path / "data" / "logs" / "hooks.log").exists()
    assert stored(sqlite_url(tmp_path)) == (
        db.HEAD,
        [("s-1", "user", "Plan a trip to Lyon."), ("s-1", "assistant", "Gladly.")],
    )


def test_the_mcp_server_makes_the_store_and_answers(tmp_path):
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "dreamer", "mcp"], env=env_of(tmp_path), cwd=tmp_path
    )

    async def talk() -> tuple[dict, dict]:
        with open(tmp_path / "server.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    added = await session.call_tool("add_memory", {"text": FACT, "kind": "preference"})
                    listed = await session.call_tool("list_memories", {})
        return json.loads(added.content[0].text), json.loads(listed.content[0].text)

    added, listed = anyio.run(talk)
    assert [m["memory_id"] for m in listed["memories"]] == [added["memory_id"]]
    assert (tmp_path / "server.log").read_text() == ""
    engine = db.make_engine(sqlite_url(tmp_path))
    try:
        assert db.current_revision(engine) == db.HEAD
        with session_scope(engine) as s:
            assert [(m.user_id, m.text) for m in s.exec(select(Memory)).all()] == [("alice", FACT)]
    finally:
        engine.dispose()


def test_serve_makes_the_store_and_answers_healthz(tmp_path):
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamer", "serve", "--insecure-single-user", "alice", "--port", str(port)],
        env=env_of(tmp_path),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def health() -> httpx.Response | None:
        assert proc.poll() is None, "the server exited"
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
        except httpx.TransportError:
            return None

    try:
        answer = wait_for(health, "the server to answer")
    finally:
        code, err = stop(proc)
    assert (answer.status_code, answer.json()) == (200, {"ok": True})
    assert code == -signal.SIGTERM, err  # uvicorn shuts down, then dies of the signal it was sent
    assert "Application shutdown complete." in err
    assert stored(sqlite_url(tmp_path)) == (db.HEAD, [])


def test_the_daemon_makes_the_store_and_runs_a_pass(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamer", "run"],
        env=env_of(tmp_path, DREAMER_WARMUP_SECONDS="0.2", DREAMER_DREAM_INTERVAL_SECONDS="3600"),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def first_run() -> tuple[str, int] | None:
        assert proc.poll() is None, "the daemon exited"
        if not (tmp_path / "data" / "dreamer.db").exists():
            return None
        engine = db.make_engine(sqlite_url(tmp_path))
        try:
            if db.current_revision(engine) != db.HEAD:
                return None
            with session_scope(engine) as s:
                row = s.exec(select(DreamRun).where(DreamRun.finished_at.is_not(None))).first()  # type: ignore[union-attr]
            return (row.trigger, row.sessions) if row is not None else None
        finally:
            engine.dispose()

    try:
        ran = wait_for(first_run, "the daemon's first pass")
    finally:
        code, err = stop(proc)
    assert ran == ("scheduler", 0)
    assert code == 0, err


# --------------------------------------------------------------------------- at the same moment

GATED = """
import pathlib, sys, time
import alembic.command, sqlalchemy, sqlmodel
import dreamer.core.models, dreamer.ingest.files, dreamer.store.db, dreamer.engine.shared_index
import dreamer.online.claude_hooks
from dreamer.cli import main
gate, ready = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
ready.touch()
while not gate.exists():
    time.sleep(0.002)
sys.argv = ["dreamer", *sys.argv[3:]]
main()
"""
"""A CLI process that loads its modules, says it is ready, and starts its command only when
the gate opens: every process then makes the store at the same moment."""


def at_once(tmp_path, url: str | None, commands: list[tuple[list[str], str | None]]) -> list[tuple[int, str]]:
    """Run the commands (arguments, stdin) as processes that start together; their exit status and stderr."""
    env = env_of(tmp_path, **({"DREAMER_DATABASE_URL": url} if url else {}))
    gate = tmp_path / "gate"
    procs = []
    for i, (args, _stdin) in enumerate(commands):
        ready = tmp_path / f"ready-{i}"
        argv = [sys.executable, "-c", GATED, str(gate), str(ready), *args]
        procs.append(
            subprocess.Popen(
                argv, env=env, cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
        )
    wait_for(lambda: all((tmp_path / f"ready-{i}").exists() for i in range(len(commands))), "every process ready")
    gate.touch()
    results = []
    for proc, (_args, stdin) in zip(procs, commands, strict=True):
        _, err = proc.communicate(input=(stdin or "").encode(), timeout=120)
        results.append((proc.returncode, err.decode()))
    return results


def four_writers(tmp_path) -> list[tuple[list[str], str | None]]:
    """Two ingests and two Claude Code hooks of four sessions, the first use of one data dir."""
    commands: list[tuple[list[str], str | None]] = []
    for name in ("a", "b"):
        write_chat(tmp_path / f"{name}.jsonl", ("user", f"I prefer {name}."), ("assistant", "Noted."))
        commands.append((["ingest", "--user", "alice", str(tmp_path / f"{name}.jsonl")], None))
    for name in ("c", "d"):
        transcript = tmp_path / f"{name}-transcript.jsonl"
        append_turns(transcript, ("user", f"Say {name}."), ("assistant", f"{name}."), session=name)
        commands.append((["hook", "Stop"], hook_input("Stop", transcript, session_id=name)))
    return commands


EVERY_MESSAGE = [
    ("a", "user", "I prefer a."),
    ("a", "assistant", "Noted."),
    ("b", "user", "I prefer b."),
    ("b", "assistant", "Noted."),
    ("c", "user", "Say c."),
    ("c", "assistant", "c."),
    ("d", "user", "Say d."),
    ("d", "assistant", "d."),
]


def one_version_row(url: str) -> list[str]:
    engine = db.make_engine(url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text("SELECT version_num FROM alembic_version")).scalars())
    finally:
        engine.dispose()


def test_processes_making_one_sqlite_store_at_once_all_succeed(tmp_path):
    results = at_once(tmp_path, None, four_writers(tmp_path))
    assert results == [(0, "")] * 4
    assert stored(sqlite_url(tmp_path)) == (db.HEAD, EVERY_MESSAGE)
    assert one_version_row(sqlite_url(tmp_path)) == [db.HEAD]


@pytest.mark.services
def test_processes_making_one_postgresql_store_at_once_all_succeed(tmp_path, pg_url):
    results = at_once(tmp_path, pg_url, four_writers(tmp_path))
    assert results == [(0, "")] * 4
    assert stored(pg_url) == (db.HEAD, EVERY_MESSAGE)
    assert one_version_row(pg_url) == [db.HEAD]
    assert not (tmp_path / "data" / "dreamer.db").exists()
