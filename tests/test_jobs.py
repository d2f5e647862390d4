"""The jobs workers run, in process: fan-out of due sessions (or a skip while busy), one
session under someone else's lease, and the online flush."""

from __future__ import annotations

import pytest
from sqlmodel import select

from dreamer.core.errors import Busy
from dreamer.core.models import DreamRun
from dreamer.engine import jobs
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.store import record_messages
from dreamer.online.flush import notes as flushing
from dreamer.store import leases
from dreamer.store.busy import AlwaysIdle, SqlBusySignal, activity_key
from dreamer.store.db import session_scope


def session_with(text: str) -> list[dict]:
    out = []
    for i, line in enumerate([text, "ok", "sure", "thanks"]):
        out += [{"role": "user", "content": line}, {"role": "assistant", "content": f"reply {i}"}]
    return out


@pytest.fixture
def rt(settings, engine, tmp_path):
    runtime = Runtime.open(
        settings, engine=engine, llm=None, embedder=None, index=EdgeIndex(tmp_path / "edge", 8), busy=AlwaysIdle()
    )
    yield runtime
    runtime._index.close()


def test_fan_out_sends_each_due_session_once(rt):
    a = record_messages(rt.engine, "a", session_with("I prefer tea."), user_id="alice").session_id
    b = record_messages(rt.engine, "b", session_with("I prefer jazz."), user_id="bob").session_id
    record_messages(rt.engine, "short", [{"role": "user", "content": "hi"}], user_id="carol")  # too few rounds
    sent: list[int] = []
    result = jobs.fan_out(rt, sent.append, trigger="test")
    assert sorted(sent) == sorted(result.session_ids) == sorted([a, b])
    assert result.skipped is None


def test_fan_out_records_a_skip_while_the_agent_is_busy(settings, engine, tmp_path):
    busy = SqlBusySignal(engine, window_seconds=60)
    busy.begin(activity_key("alice"))
    rt = Runtime.open(settings, engine=engine, llm=None, embedder=None, index=EdgeIndex(tmp_path / "e", 8), busy=busy)
    try:
        record_messages(engine, "a", session_with("I prefer tea."), user_id="alice")
        sent: list[int] = []
        result = jobs.fan_out(rt, sent.append, trigger="beat")
        assert (sent, result.skipped) == ([], "1 request(s) in flight")
        with session_scope(engine) as s:
            run = s.get(DreamRun, result.run_id)
        assert (run.trigger, run.status, run.error) == ("beat", "skipped_busy", "1 request(s) in flight")
    finally:
        rt._index.close()


def test_a_session_leased_elsewhere_raises_lease_busy_until_the_lease_is_gone(rt):
    sid = record_messages(rt.engine, "a", session_with("I prefer tea."), user_id="alice").session_id
    assert leases.acquire(rt.engine, leases.session_lease(sid), "other-host:1:1", ttl_seconds=30)

    with pytest.raises(jobs.LeaseBusy) as caught:
        jobs.run_session(rt, sid, trigger="test")
    assert 25 < caught.value.delay <= 31
    assert jobs.pending(rt, sid)

    leases.acquire(rt.engine, leases.session_lease(sid), "other-host:1:1", ttl_seconds=-1)  # it expires
    assert jobs.lease_wait(rt, sid) == 0.5
    [run] = jobs.run_session(rt, sid, trigger="test")
    assert (run.sessions, run.added) == (1, 1)
    assert not jobs.pending(rt, sid)
    assert jobs.run_session(rt, sid, trigger="test")[0].sessions == 0  # a redelivery is a no-op


def test_catch_up_runs_passes_until_a_long_session_is_done(rt):
    st = rt.settings.model_copy(update={"tokens_per_session_pass": 5})
    rt.settings = st
    sid = record_messages(rt.engine, "long", session_with("I prefer tea."), user_id="alice").session_id
    runs = jobs.run_session(rt, sid, trigger="test", catch_up=True)
    assert len(runs) > 1 and not jobs.pending(rt, sid)
    assert sum(r.messages for r in runs) == 8


def test_flush_runs_through_the_online_companion(rt):
    sid = record_messages(rt.engine, "a", session_with("I prefer tea."), user_id="alice").session_id
    result = flushing.run_flush(rt, sid)
    assert result.session_id == sid and result.status in ("flushed", "nothing_new")
    with session_scope(rt.engine) as s:
        assert s.exec(select(DreamRun)).all() == []


def test_a_session_waits_while_the_agent_is_busy_only_when_asked_to(settings, engine, tmp_path):
    busy = SqlBusySignal(engine, window_seconds=60)
    rt = Runtime.open(settings, engine=engine, llm=None, embedder=None, index=EdgeIndex(tmp_path / "e", 8), busy=busy)
    try:
        sid = record_messages(engine, "a", session_with("I prefer tea."), user_id="alice").session_id
        busy.begin(activity_key("alice"))
        with pytest.raises(Busy) as caught:
            jobs.run_session(rt, sid, trigger="celery", wait_while_busy=True)
        assert (str(caught.value), caught.value.delay) == (f"session {sid} waits: 1 request(s) in flight", 0.0)
        assert jobs.pending(rt, sid)
        with session_scope(engine) as s:
            assert s.exec(select(DreamRun)).all() == []  # no run row for each waiting session

        [run] = jobs.run_session(rt, sid, trigger="reprocess")  # asked for: it runs
        assert (run.sessions, run.added) == (1, 1) and not jobs.pending(rt, sid)
    finally:
        rt._index.close()
