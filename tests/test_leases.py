from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from clikit import run, write_chat
from dreamkit import extraction_script
from sqlmodel import select

from dreamer.core.models import DreamRun, Lease, utcnow
from dreamer.engine.dream import dream_pass
from dreamer.engine.runs import not_taken
from dreamer.engine.runtime import Runtime
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.store import leases
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope


def test_lease_is_exclusive_until_expiry(engine):
    now = utcnow()
    assert leases.acquire(engine, "session:1", "w1", 60, now)
    assert not leases.acquire(engine, "session:1", "w2", 60, now)
    assert leases.acquire(engine, "session:1", "w1", 60, now)  # the holder renews
    assert leases.acquire(engine, "session:1", "w2", 60, now + timedelta(seconds=61))
    assert not leases.acquire(engine, "session:1", "w1", 60, now + timedelta(seconds=62))


def test_release_frees_only_for_the_owner(engine):
    assert leases.acquire(engine, "session:2", "w1", 60)
    leases.release(engine, "session:2", "w2")
    assert not leases.acquire(engine, "session:2", "w2", 60)
    leases.release(engine, "session:2", "w1")
    assert leases.acquire(engine, "session:2", "w2", 60)


def _runs(engine) -> dict[int, tuple[str, str | None]]:
    with session_scope(engine) as s:
        return {r.id: (r.status, r.error) for r in s.exec(select(DreamRun).order_by(DreamRun.id))}


def test_a_running_run_without_a_live_run_lease_is_swept_as_abandoned(engine):
    now = utcnow()
    with session_scope(engine) as s:
        for status in ("running", "running", "running", "ok"):
            s.add(DreamRun(status=status))
    assert leases.acquire(engine, leases.run_lease(1), "host:1:1", 60, now)  # alive
    assert leases.acquire(engine, leases.run_lease(2), "host:2:2", 60, now - timedelta(seconds=61))  # expired
    # run 3 has no lease at all: its process died before its first session, or long ago
    assert leases.sweep_abandoned_runs(engine, now) == [2, 3]
    assert _runs(engine) == {
        1: ("running", None),
        2: ("abandoned", leases.ABANDONED),
        3: ("abandoned", leases.ABANDONED),
        4: ("ok", None),
    }
    assert leases.sweep_abandoned_runs(engine, now) == []


def test_a_pass_holds_its_run_lease_while_it_runs_and_gives_it_back(settings, engine):
    with session_scope(engine) as s:
        s.add(DreamRun(status="running"))  # left behind by a killed pass
    with Runtime.open(
        settings.model_copy(update={"extractor": "rules"}), engine=engine, llm=None, embedder=None, busy=AlwaysIdle()
    ) as rt:
        run = dream_pass(rt)
    assert _runs(engine) == {1: ("abandoned", leases.ABANDONED), run.id: ("ok", None)}
    with session_scope(engine) as s:
        assert s.exec(select(Lease)).all() == []


def test_a_run_lease_is_renewed_once_half_of_it_has_passed(engine):
    ticks = [100.0]
    assert leases.acquire(engine, leases.run_lease(7), "host:1:7", 60)
    lease = leases.RunLease(engine, 7, "host:1:7", 60, clock=lambda: ticks[0])

    def expiry():
        with session_scope(engine) as s:
            return s.get(Lease, "run:7").expires_at

    first = expiry()
    ticks[0] = 129.0
    lease.keep_alive()
    assert expiry() == first  # under half the lease: no write
    ticks[0] = 130.0
    lease.keep_alive()
    renewed = expiry()
    assert renewed > first
    ticks[0] = 159.0
    lease.keep_alive()
    assert expiry() == renewed  # measured from the renewal, not from the start


def test_a_held_lease_another_owner_took_is_reported_lost_and_left_to_them(engine):
    ticks = [100.0]
    assert leases.acquire(engine, "session:3", "me", 60, now=utcnow() - timedelta(seconds=120))  # expired
    held = leases.HeldLease(engine, "session:3", "me", 60, clock=lambda: ticks[0])
    assert leases.acquire(engine, "session:3", "them", 60)
    assert held.keep_alive() is True  # under half the lease: nothing asked
    ticks[0] = 130.0
    assert held.keep_alive() is False
    with session_scope(engine) as s:
        assert s.get(Lease, "session:3").owner == "them"


# --- a holder that is gone or silent ----------------------------------------------------

HOST = socket.gethostname()


def dead_pid() -> int:
    """The pid of a process of this host that has ended and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.mark.parametrize(
    ("owner", "alive", "gone"),
    [
        (f"{HOST}:4242:7", False, True),  # this host, not running: gone
        (f"{HOST}:4242:7", True, False),
        ("elsewhere:4242:7", False, False),  # another host: its heartbeat or expiry tells
        (f"{HOST}:{os.getpid()}:7", False, False),  # this very process
        ("w1", False, False),
        (f"{HOST}:not-a-pid", False, False),
    ],
)
def test_whether_a_holder_is_gone(owner, alive, gone):
    assert leases.holder_gone(owner, host=HOST, alive=lambda pid: alive) is gone


def test_a_lease_of_a_dead_holder_of_this_host_is_taken_over_at_once(engine):
    dead = f"{HOST}:{dead_pid()}:5"
    assert leases.acquire(engine, "session:9", dead, 600, beat=True)
    assert leases.acquire(engine, "session:9", "me", 600)
    assert leases.holder(engine, "session:9").owner == "me"


def test_a_live_holder_keeps_its_lease_until_its_heartbeat_falls_silent(engine):
    now = utcnow()
    elsewhere = "elsewhere:4242:5"
    assert leases.acquire(engine, "session:8", elsewhere, 600, now, beat=True)
    later = now + timedelta(seconds=leases.SILENT_GRACE - 1)
    assert not leases.acquire(engine, "session:8", "me", 600, later)
    assert leases.beat(engine, elsewhere, later) == 1  # it still works: its grace starts again
    assert not leases.acquire(engine, "session:8", "me", 600, later + timedelta(seconds=leases.SILENT_GRACE - 1))
    silent = later + timedelta(seconds=leases.SILENT_GRACE + 1)
    assert leases.acquire(engine, "session:8", "me", 600, silent)


def test_a_lease_without_a_heartbeat_of_a_live_holder_waits_for_its_expiry(engine):
    now = utcnow()
    assert leases.acquire(engine, "user:ann", "elsewhere:4242:ab", 600, now)
    assert not leases.acquire(engine, "user:ann", "me", 600, now + timedelta(seconds=599))
    assert leases.acquire(engine, "user:ann", "me", 600, now + timedelta(seconds=601))


def test_a_run_whose_holder_is_gone_is_swept_at_once(engine):
    with session_scope(engine) as s:
        s.add(DreamRun(status="running"))
        s.add(DreamRun(status="running"))
    assert leases.acquire(engine, leases.run_lease(1), f"{HOST}:{dead_pid()}:1", 600, beat=True)
    assert leases.acquire(engine, leases.run_lease(2), f"{HOST}:{os.getpid()}:2", 600, beat=True)
    assert leases.sweep_abandoned_runs(engine) == [1]


def test_why_a_due_session_was_not_taken():
    now = utcnow()
    beating = leases.Holder("box:4242:12", now + timedelta(seconds=500), now - timedelta(seconds=3))
    assert (
        not_taken(None, beating, 10, now) == "is due, leased by run 12 (process 4242 on box), which last beat 3 s ago"
    )
    expired = leases.Holder("box:4242:12", now - timedelta(seconds=1), None)
    stopped = DreamRun(status="stopped", error="the model's circuit breaker opened after 3 failures in a row")
    assert not_taken(stopped, expired, 10, now) == (
        "is due, not reached: the pass stopped before it (the model's circuit breaker opened after 3 failures in a row)"
    )
    assert not_taken(DreamRun(status="ok"), None, 10, now) == (
        "is due, not reached by this pass (a pass takes at most 10: DREAMER_MAX_SESSIONS_PER_PASS)"
    )


def test_after_kill_nine_mid_pass_an_immediate_rerun_dreams_the_sessions(tmp_path):
    """A pass killed while its model call is under way leaves its run and session leases behind;
    the next pass finds their holder gone and takes them at once (the leases last 600 s)."""
    for name in ("a", "b"):
        write_chat(tmp_path / f"{name}.jsonl", ("user", f"I prefer {name}-flavoured tea."), ("assistant", "Noted."))
        assert run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "alice").returncode == 0
    with ScriptedServer(extraction_script()) as srv:
        srv.push(Reply.delay(60))  # the first call hangs: the pass is mid-call when it is killed
        env = {"DREAMER_LLM_BASE_URL": srv.url, "DREAMER_LLM_MODEL": "scripted", "DREAMER_MIN_ROUNDS": "1"}
        killed = popen(tmp_path, "dream", "--force", env=env)
        try:
            wait_for(lambda: srv.pending == 0 or killed.poll() is not None)
        finally:
            killed.send_signal(signal.SIGKILL)
            killed.wait()
        assert killed.returncode == -signal.SIGKILL
        again = run(tmp_path, "dream", "--force", "--json", env=env)
        assert again.returncode == 0, again.stderr
        listed = run(tmp_path, "runs", "ls", "--json")
    record = json.loads(again.stdout)
    assert (record["status"], record["sessions"], record["failed_sessions"], record["error"]) == ("ok", 2, 0, None)
    assert [(r["status"], r["error"]) for r in json.loads(listed.stdout)] == [
        ("ok", None),
        ("abandoned", leases.ABANDONED),
    ]


def popen(tmp_path, *args, env):
    e = {**os.environ, "DREAMER_DATA_DIR": str(tmp_path / "data"), "DREAMER_EMBEDDER": "none", **env}
    return subprocess.Popen([sys.executable, "-m", "dreamer", *args], env=e, cwd=tmp_path)


def wait_for(done, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "the pass never reached its model call"
        time.sleep(0.05)
