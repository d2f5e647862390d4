"""The scheduler: the pure policy over a simulated clock, the APScheduler shell running real
passes with seconds-long settings, and a graceful stop of a `dreamer run` process mid-pass."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
from dreamkit import extraction_script
from sqlmodel import select

from dreamer.core.models import Cursor, DreamRun, Memory, SchedulerState, Session, utcnow
from dreamer.engine.schedule import (
    BACKOFF,
    OVERLAP,
    RUN,
    WAIT,
    Policy,
    initial_state,
    next_action,
    on_backoff,
    on_cut_short,
    on_finish,
    on_start,
    scheduler_status,
    slot_after,
)
from dreamer.engine.shared_index import open_shared_runtime
from dreamer.ingest.store import record_messages
from dreamer.llm.client import build_llm
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.store import db
from dreamer.store.busy import SqlBusySignal, activity_key
from dreamer.store.db import session_scope
from workers.scheduler import DreamScheduler, InlineExecutor, Ran

T0 = datetime(2024, 1, 1, tzinfo=UTC)
POLICY = Policy(interval=3600, warmup=120, backoff_base=60, backoff_cap=1800)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def simulate(policy: Policy, busy_until: float, *, until: float, run_seconds: float = 30) -> list[tuple[float, str]]:
    """Jump a simulated clock from decision to decision; the agent is busy before `busy_until`."""
    state = initial_state(T0, policy)
    trace: list[tuple[float, str]] = []
    now = T0
    while now < at(until):
        now = max(now, state.due_at)
        offset = (now - T0).total_seconds()
        action = next_action(state, now, "busy" if offset < busy_until else None, policy=policy, rand=0.5)
        trace.append((offset, action.kind))
        if action.kind == BACKOFF:
            state = on_backoff(state, action, now, policy)
        elif action.kind == RUN:
            state = on_start(state, now, policy)
            assert next_action(state, now, None, policy=policy, rand=0.5).kind == OVERLAP
            now += timedelta(seconds=run_seconds)
            state = on_finish(state, now, run_id=len(trace))
    return trace


# --------------------------------------------------------------------------- the pure policy


def test_nothing_runs_before_the_warm_up():
    state = initial_state(T0, POLICY)
    action = next_action(state, at(10), None, policy=POLICY, rand=0.5)
    assert (action.kind, action.at) == (WAIT, at(120))


def test_an_idle_agent_gets_a_pass_after_the_warm_up_then_every_interval():
    assert simulate(POLICY, busy_until=0, until=3 * 3600) == [(120, RUN), (3720, RUN), (7320, RUN), (10920, RUN)]


def test_busy_backs_off_doubling_then_runs_once_idle_and_the_backoff_starts_over():
    trace = simulate(POLICY, busy_until=500, until=3720 + 1)
    assert trace == [(120, BACKOFF), (180, BACKOFF), (300, BACKOFF), (540, RUN), (3720, RUN)]

    state = initial_state(T0, POLICY)
    for now in (120, 180, 300):
        action = next_action(state, at(now), "busy", policy=POLICY, rand=0.5)
        state = on_backoff(state, action, at(now), POLICY)
    assert (state.consecutive_skips, state.last_skip_reason, state.due_at) == (3, "busy", at(540))
    state = on_finish(on_start(state, at(540), POLICY), at(560), run_id=7)
    assert (state.consecutive_skips, state.last_run_at, state.last_run_id) == (0, at(560), 7)
    assert state.due_at == at(3720)  # the pending retry is gone, the regular slot stays
    again = next_action(state, at(3720), "busy", policy=POLICY, rand=0.5)
    assert (again.kind, again.delay) == (BACKOFF, 60)


def test_the_backoff_is_capped_and_never_waits_past_the_next_regular_slot():
    policy = Policy(interval=600, warmup=0, backoff_base=60, backoff_cap=1800)
    trace = simulate(policy, busy_until=1300, until=1400)
    assert trace == [
        (0, BACKOFF),
        (60, BACKOFF),
        (180, BACKOFF),
        (420, BACKOFF),
        (600, BACKOFF),
        (1200, BACKOFF),
        (1800, RUN),
    ]
    delays = []
    rare = Policy(interval=10**6, warmup=0, backoff_base=60, backoff_cap=1800)
    state = initial_state(T0, rare)
    for _ in range(7):
        action = next_action(state, state.due_at, "busy", policy=rare, rand=0.5)
        delays.append(action.delay)
        state = on_backoff(state, action, state.due_at, rare)
    assert delays == [60, 120, 240, 480, 960, 1800, 1800]


def test_jitter_moves_the_retry_but_keeps_it_within_a_quarter():
    state = initial_state(T0, POLICY)
    early = next_action(state, at(120), "busy", policy=POLICY, rand=0.0)
    late = next_action(state, at(120), "busy", policy=POLICY, rand=1.0)
    assert (early.at, late.at) == (at(165), at(195))


def test_no_overlap_while_a_pass_runs():
    state = on_start(initial_state(T0, POLICY), at(120), POLICY)
    assert next_action(state, at(99_999), None, policy=POLICY, rand=0.5).kind == OVERLAP
    assert next_action(state, at(99_999), "busy", policy=POLICY, rand=0.5).kind == OVERLAP


def test_a_pass_longer_than_the_interval_is_followed_at_once_by_one_more():
    trace = simulate(Policy(interval=60, warmup=0, backoff_base=5, backoff_cap=60), 0, until=301, run_seconds=150)
    assert trace == [(0, RUN), (150, RUN), (300, RUN)]


def test_a_pass_cut_short_by_a_busy_agent_is_retried_after_the_backoff_then_backs_off_doubling():
    state = on_start(initial_state(T0, POLICY), at(120), POLICY)
    state = on_cut_short(
        on_finish(state, at(400), 5), at(400), "the agent became busy: 1 request(s) in flight", policy=POLICY, rand=0.5
    )
    assert (state.running, state.last_run_id, state.due_at, state.consecutive_skips) == (False, 5, at(460), 1)
    assert state.last_skip_reason == "the agent became busy: 1 request(s) in flight"
    again = next_action(state, at(460), "busy", policy=POLICY, rand=0.5)
    assert (again.kind, again.at) == (BACKOFF, at(580))
    assert next_action(state, at(460), None, policy=POLICY, rand=0.5).kind == RUN


def test_passes_cut_short_one_after_another_back_off_doubling_and_a_whole_pass_starts_over():
    """A user's consolidation lock kept elsewhere: each retry runs (the agent is idle) and leaves
    the session again, so the retries must space out as busy skips do."""
    state = on_start(initial_state(T0, POLICY), at(120), POLICY)
    for started, finished, retry, skips in ((120, 400, 460, 1), (460, 470, 590, 2), (590, 600, 840, 3)):
        state = on_finish(on_start(state, at(started), POLICY), at(finished), 5, cut_short=True)
        state = on_cut_short(state, at(finished), "left due", policy=POLICY, rand=0.5)
        assert (state.retry_at, state.consecutive_skips) == (at(retry), skips)
    assert on_finish(on_start(state, at(840), POLICY), at(850), 6).consecutive_skips == 0


def test_a_cut_short_retry_never_waits_past_the_next_regular_slot():
    state = on_start(initial_state(T0, POLICY), at(120), POLICY)
    state = on_cut_short(on_finish(state, at(3700), 5), at(3700), "busy", policy=POLICY, rand=0.5)
    assert (state.retry_at, state.due_at) == (at(3760), at(3720))  # the regular run comes first


def test_slot_after():
    assert slot_after(at(120), 3600, at(0)) == at(120)
    assert slot_after(at(120), 3600, at(120)) == at(3720)
    assert slot_after(at(120), 3600, at(7319)) == at(7320)


# --------------------------------------------------------------------------- the APScheduler shell


def session_with(text: str) -> list[dict]:
    lines = [text, "ok", "sure", "thanks"]
    out = []
    for i, line in enumerate(lines):
        out += [{"role": "user", "content": line}, {"role": "assistant", "content": f"reply {i}"}]
    return out


def wait_for(check, timeout: float = 20.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def cursors(engine) -> dict[int, tuple[int, int]]:
    with session_scope(engine) as s:
        rows = s.exec(
            select(Session.id, Session.last_seq, Cursor.processed_seq).join(Cursor, Cursor.session_id == Session.id)
        )
        return {sid: (last, done) for sid, last, done in rows}


def fast(settings, **extra):
    values = dict(
        warmup_seconds=0.2,
        dream_interval_seconds=1,
        embedder="none",
        llm_base_url="",
        busy_window_seconds=0.3,
        backoff_base_seconds=0.2,
        backoff_cap_seconds=0.8,
    )
    values.update(extra)
    return settings.model_copy(update=values)


@pytest.fixture
def shell(settings, sqlite_engine):
    daemons = []

    def start(st, busy, **parts):
        parts = {"embedder": None, "llm": None, **parts}  # no model unless asked: the built-in extractor
        rt = open_shared_runtime(st, engine=sqlite_engine, busy=busy, **parts)
        daemon = DreamScheduler(rt, InlineExecutor(rt), rand=lambda: 0.5)
        daemons.append((daemon, rt))
        daemon.start()
        return daemon

    yield start
    for daemon, rt in daemons:
        daemon.shutdown()
        rt.close()


def test_the_daemon_runs_real_passes_after_the_warm_up_and_every_interval(settings, sqlite_engine, shell):
    st = fast(settings)
    first = record_messages(sqlite_engine, "s1", session_with("I prefer quiet hotels."), user_id="alice")
    daemon = shell(st, SqlBusySignal(sqlite_engine, window_seconds=st.busy_window_seconds))

    wait_for(lambda: cursors(sqlite_engine)[first.session_id][1] == 8, what="the first pass")
    later = record_messages(sqlite_engine, "s2", session_with("I prefer window seats."), user_id="alice")
    wait_for(lambda: cursors(sqlite_engine)[later.session_id][1] == 8, what="a pass one interval later")
    daemon.shutdown()

    with session_scope(sqlite_engine) as s:
        texts = sorted(m.text for m in s.exec(select(Memory)))
        runs = s.exec(select(DreamRun).where(DreamRun.trigger == "scheduler").order_by(DreamRun.id)).all()
        row = s.get(SchedulerState, "dream")
    assert texts == ["The user prefers quiet hotels.", "The user prefers window seats."]
    assert len(runs) >= 2 and all(r.status == "ok" for r in runs)
    assert sum(r.sessions for r in runs) == 2
    assert row.last_run_id == runs[-1].id and row.consecutive_skips == 0
    status = scheduler_status(sqlite_engine)
    assert status["scheduler_next_run"] and f"(run {runs[-1].id})" in status["scheduler_last_run"]


def test_the_daemon_backs_off_while_busy_and_runs_as_soon_as_the_agent_is_idle(settings, sqlite_engine, shell):
    st = fast(settings, dream_interval_seconds=3600, warmup_seconds=0.1)
    rec = record_messages(sqlite_engine, "s1", session_with("I prefer green tea."), user_id="alice")
    busy = SqlBusySignal(sqlite_engine, window_seconds=st.busy_window_seconds)
    busy.begin(activity_key("alice"))
    shell(st, busy)

    row = wait_for(lambda: _state_row(sqlite_engine, lambda r: r.consecutive_skips >= 3), what="three skips")
    assert row.last_skip_reason == "1 request(s) in flight"
    assert cursors(sqlite_engine)[rec.session_id][1] == 0
    busy.end(activity_key("alice"))

    wait_for(lambda: cursors(sqlite_engine)[rec.session_id][1] == 8, what="a pass once idle (not an hour later)")
    row = wait_for(lambda: _state_row(sqlite_engine, lambda r: r.last_run_id is not None), what="the state row")
    assert row.consecutive_skips == 0
    with session_scope(sqlite_engine) as s:
        statuses = [r.status for r in s.exec(select(DreamRun).order_by(DreamRun.id))]
    assert statuses[-1] == "ok" and statuses.count("skipped_busy") >= 3
    assert set(statuses[:-1]) == {"skipped_busy"}


def test_the_daemon_retries_a_pass_the_agent_cut_short_once_idle_not_an_interval_later(settings, sqlite_engine, shell):
    st = fast(settings, dream_interval_seconds=3600, warmup_seconds=0.1, quiet_period_seconds=0)
    recs = [
        record_messages(sqlite_engine, f"s{i}", session_with(f"I prefer tea number {i}."), user_id=f"u{i}")
        for i in range(2)
    ]
    busy = SqlBusySignal(sqlite_engine, window_seconds=st.busy_window_seconds)
    script = extraction_script()
    calls = []

    def busy_from_the_first_call(body):  # u1's own client starts a request while u0 is dreamed
        if not calls:
            busy.begin(activity_key("u1"))
        calls.append(1)
        return script(body)

    with ScriptedServer(embed_dim=64) as server:
        server.set_script(busy_from_the_first_call)
        st = st.model_copy(update={"llm_base_url": server.url})
        shell(st, busy, llm=build_llm(st))
        wait_for(lambda: _state_row(sqlite_engine, lambda r: r.consecutive_skips >= 1), what="the pass cut short")
        assert [cursors(sqlite_engine)[r.session_id][1] for r in recs] == [8, 0]
        busy.end(activity_key("u1"))
        wait_for(lambda: cursors(sqlite_engine)[recs[1].session_id][1] == 8, what="the rest, once idle")
        wait_for(lambda: _passes(sqlite_engine)[-1][0] != "running", what="the retried pass's run row")
    runs = _passes(sqlite_engine)
    assert (runs[0], runs[-1]) == (("partial", 1), ("ok", 1))


def _passes(engine) -> list[tuple[str, int]]:
    with session_scope(engine) as s:
        return [(r.status, r.sessions) for r in s.exec(select(DreamRun).where(DreamRun.status != "skipped_busy"))]


class Clock:
    """The scheduler's clock, moved by the test."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_a_tick_the_database_refuses_changes_nothing_and_is_tried_again(settings, sqlite_engine):
    """The schedule cannot be saved at the slot (its table is out of reach): nothing runs, the
    daemon is not left thinking a pass runs, and the retry after the backoff base runs it."""
    from dreamer.engine.runtime import Runtime
    from dreamer.store.busy import AlwaysIdle

    st = settings.model_copy(update={"warmup_seconds": 120, "backoff_base_seconds": 60, "embedder": "none"})
    rt = Runtime.open(st, engine=sqlite_engine, llm=None, embedder=None, busy=AlwaysIdle())
    ran: list[int] = []
    clock = Clock(T0)
    daemon = DreamScheduler(rt, lambda stop: ran.append(1) or Ran(7), clock=clock, rand=lambda: 0.5)
    clock.now = T0 + timedelta(seconds=120)
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE scheduler_state RENAME TO scheduler_state_away")

    refused = daemon.tick()

    assert (refused.kind, refused.at, refused.reason) == (BACKOFF, T0 + timedelta(seconds=180), "the database refused")
    assert (daemon.state.running, ran) == (False, [])
    with sqlite_engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE scheduler_state_away RENAME TO scheduler_state")
    clock.now = refused.at
    assert (daemon.tick().kind, ran, daemon.state.running, daemon.state.last_run_id) == (RUN, [1], False, 7)
    rt.close()


def test_a_pass_the_agent_cuts_short_stops_between_sessions_and_its_rest_runs_after_the_backoff(
    settings, sqlite_engine
):
    """The daemon's pass keeps asking whether a session's owner is busy between sessions (it used
    to run as forced, to the end), leaves the busy owners' sessions due, and what it left is
    retried after the backoff base rather than at the next regular run."""
    from dreamer.engine.runtime import Runtime

    st = settings.model_copy(
        update={
            "warmup_seconds": 120,
            "backoff_base_seconds": 60,
            "embedder": "none",
            "busy_window_seconds": 0.0,
            "quiet_period_seconds": 0,
        }
    )
    recs = [
        record_messages(sqlite_engine, f"s{i}", session_with(f"I prefer colour number {i}."), user_id=f"u{i}")
        for i in range(3)
    ]
    busy = SqlBusySignal(sqlite_engine, window_seconds=0.0)
    script = extraction_script()

    def busy_from_the_first_call(body):  # u1's and u2's clients send requests while u0 is extracted
        busy.begin(activity_key("u1"))
        busy.begin(activity_key("u2"))
        return script(body)

    with ScriptedServer(embed_dim=64) as server:
        server.set_script(busy_from_the_first_call)
        rt = Runtime.open(
            st.model_copy(update={"llm_base_url": server.url}), engine=sqlite_engine, embedder=None, busy=busy
        )
        clock = Clock(utcnow())  # the sessions' messages are stamped by the real clock
        daemon = DreamScheduler(rt, InlineExecutor(rt, clock=clock), clock=clock, rand=lambda: 0.5)
        clock.now += timedelta(seconds=120)
        try:
            assert daemon.tick().kind == RUN
            first = cursors(sqlite_engine)
            assert [first[r.session_id][1] for r in recs] == [8, 0, 0]
            with session_scope(sqlite_engine) as s:
                run = s.exec(select(DreamRun).order_by(DreamRun.id.desc())).first()
            assert (run.status, run.sessions, run.error) == (
                "partial",
                1,
                "2 session(s) left due: their owner is busy (1 request(s) in flight)",
            )
            assert (daemon.state.due_at, daemon.state.consecutive_skips) == (clock.now + timedelta(seconds=60), 1)

            busy.end(activity_key("u1"))
            busy.end(activity_key("u2"))
            server.set_script(script)
            clock.now = daemon.state.due_at
            assert daemon.tick().kind == RUN
            assert [cursors(sqlite_engine)[r.session_id][1] for r in recs] == [8, 8, 8]
            assert (daemon.state.retry_at, daemon.state.consecutive_skips) == (None, 0)
        finally:
            rt.close()


def test_a_broker_out_of_reach_is_one_error_the_daemon_logs(settings):
    from dreamer.core.errors import Retryable
    from workers.scheduler import CeleryExecutor

    executor = CeleryExecutor(settings.model_copy(update={"broker_url": "redis://127.0.0.1:1/0"}))
    with pytest.raises(Retryable, match=r"^cannot reach the broker redis://127\.0\.0\.1:1/0: "):
        executor(lambda: False)


def _state_row(engine, ok):
    with session_scope(engine) as s:
        row = s.get(SchedulerState, "dream")
    return row if row is not None and ok(row) else None


# --------------------------------------------------------------------------- graceful stop


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_mid_pass_finishes_the_session_in_hand_and_exits_0(tmp_path, signum):
    data = tmp_path / "data"
    engine = db.make_engine(f"sqlite:///{(data / 'dreamer.db').resolve()}")
    db.upgrade(engine)
    n = 40
    for i in range(n):
        record_messages(engine, f"s{i}", session_with(f"I prefer colour number {i}."), user_id=f"user{i % 3}")
    script = extraction_script()
    with ScriptedServer(embed_dim=64) as server:
        server.set_script(lambda body: Reply.delay(0.1, script(body)))
        proc = subprocess.Popen(
            [sys.executable, "-m", "dreamer", "run"],
            env=_env(data, server.url),
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            wait_for(lambda: sum(done == last for last, done in cursors(engine).values()) >= 3, what="a pass under way")
            proc.send_signal(signum)
            output, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, output
    states = cursors(engine)
    processed = [sid for sid, (last, done) in states.items() if done == last]
    untouched = [sid for sid, (last, done) in states.items() if done == 0]
    assert len(processed) + len(untouched) == n, states
    assert processed and untouched, "the stop did not land mid-pass"
    with session_scope(engine) as s:
        run = s.exec(select(DreamRun).order_by(DreamRun.id.desc())).first()
        memories = s.exec(select(Memory)).all()
    assert (run.status, run.error, run.sessions) == ("ok", "stopped on request", len(processed))
    assert len(memories) == len(processed)
    engine.dispose()


def _env(data, llm_url: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    env.update(
        {
            "DREAMER_DATA_DIR": str(data),
            "DREAMER_LLM_BASE_URL": llm_url,
            "DREAMER_EMBEDDER": "none",
            "DREAMER_WARMUP_SECONDS": "0.2",
            "DREAMER_DREAM_INTERVAL_SECONDS": "3600",
            "DREAMER_MAX_SESSIONS_PER_PASS": "1000",
            "DREAMER_BUSY_BACKEND": "sql",
        }
    )
    return env
