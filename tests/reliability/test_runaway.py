"""No runaway: a pass with nothing new makes no model call at all, and a busy agent never gets
a pass (neither at its start nor once it turns busy in the middle)."""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
import redis
from conftest import need_service
from dreamkit import extraction_script

from dreamer.core.models import utcnow
from dreamer.engine.dream import dream_pass
from dreamer.engine.due import DueRules, due_sessions
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store.busy import RedisBusySignal, SqlBusySignal, activity_key
from dreamer.store.db import session_scope

from . import kit

pytestmark = pytest.mark.reliability

WINDOW = 60.0
IDLE_PASSES = 25
STEPS = 120


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=kit.DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


def test_passes_with_nothing_new_make_no_call(settings, sqlite_engine, server, tmp_path, figures):
    st = settings.model_copy(update={"min_rounds": 4})
    rt = kit.runtime(st, sqlite_engine, server, tmp_path)
    try:
        for i in range(12):
            record_messages(rt.engine, f"s{i}", kit.session_with(f"I prefer tea number {i}."), user_id=f"u{i % 3}")
        record_messages(rt.engine, "short", kit.session_with("I prefer short sessions.", rounds=2), user_id="u0")
        while dream_pass(rt).sessions:
            pass
        first = len(server.requests)
        chit_chat = [{"role": "user", "content": "thanks, bye"}, {"role": "assistant", "content": "bye"}]
        grown = kit.session_with("I prefer tea number 0.") + chit_chat
        record_messages(rt.engine, "s0", grown, user_id="u0")  # new, but nothing worth a call
        runs = [dream_pass(rt) for _ in range(IDLE_PASSES)]
        requests = len(server.requests) - first
    finally:
        rt.close()
    figures(
        "no runaway: model + embedding requests in idle passes",
        f"{requests} in {IDLE_PASSES} passes",
        f"first passes needed {first}",
    )
    assert first > 0
    assert requests == 0
    assert sum(r.llm_calls for r in runs) == 0
    assert runs[0].sessions == 1 and all(r.sessions == 0 for r in runs[1:])


def _signal(kind: str, engine):
    if kind == "sql":
        return SqlBusySignal(engine, window_seconds=WINDOW)
    need_service("Redis", "127.0.0.1", 6379)
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    prefix = f"dreamer:test:{random.randrange(10**9)}"
    return RedisBusySignal(client, window_seconds=WINDOW, prefix=prefix)


USER_KEY = activity_key("u")  # the sessions' user: their own client's requests


@pytest.mark.parametrize("kind", ["sql", "redis"])
def test_a_busy_agent_never_gets_a_pass(kind, settings, sqlite_engine, server, tmp_path, figures):
    """Random begin / end / wait / pass steps: a pass runs exactly when the agent is idle."""
    signal = _signal(kind, sqlite_engine)
    rt = kit.runtime(settings.model_copy(update={"min_rounds": 1}), sqlite_engine, server, tmp_path, busy=signal)
    rng = random.Random(7)
    in_flight, last_activity, clock = 0, None, utcnow()
    skipped = ran = 0
    try:
        for step in range(STEPS):
            op = rng.choice(["begin", "end", "end", "wait", "wait", "pass", "pass", "pass", "record"])
            if op == "begin" or (op == "end" and in_flight):
                signal.begin(USER_KEY) if op == "begin" else signal.end(USER_KEY)
                in_flight += 1 if op == "begin" else -1
                clock = last_activity = utcnow()
            elif op == "wait":
                clock += timedelta(seconds=rng.choice([10, 45, 70, 200]))
            elif op == "record":
                record_messages(rt.engine, f"s{step}", kit.session_with("I prefer quiet."), user_id="u")
            else:
                busy = in_flight > 0 or (
                    last_activity is not None and clock - last_activity < timedelta(seconds=WINDOW - 1)
                )
                if not busy and last_activity is not None and clock - last_activity < timedelta(seconds=WINDOW + 1):
                    clock += timedelta(seconds=2)  # keep clear of the window's edge
                before = len(server.requests)
                busy = busy and _anything_due(rt, clock)  # a busy user with nothing due holds nothing back
                run = dream_pass(rt, now=clock)
                if busy:
                    skipped += 1
                    assert run.status == "skipped_busy" and run.error
                    assert len(server.requests) == before, "a skipped pass calls nothing"
                else:
                    ran += 1
                    assert run.status == "ok", (run.status, run.error)
    finally:
        while in_flight:
            signal.end(USER_KEY)
            in_flight -= 1
        rt.close()
    figures(f"busy ({kind}): passes skipped while busy / run while idle", f"{skipped} / {ran}")
    assert skipped and ran


def test_a_pass_stops_when_the_agent_turns_busy(settings, sqlite_engine, server, tmp_path):
    signal = SqlBusySignal(sqlite_engine, window_seconds=WINDOW)
    rt = kit.runtime(settings.model_copy(update={"min_rounds": 1}), sqlite_engine, server, tmp_path, busy=signal)
    script = extraction_script()

    def agent_wakes_up(body):
        signal.begin(USER_KEY)  # a request of the user arrives while the first session is being extracted
        server.set_script(script)
        return script(body)

    try:
        ids = [
            record_messages(rt.engine, f"s{i}", kit.session_with(f"I prefer hue {i}."), user_id="u").session_id
            for i in range(4)
        ]
        server.set_script(agent_wakes_up)
        run = dream_pass(rt)
        assert (run.status, run.error) == (
            "partial",
            "3 session(s) left due: their owner is busy (1 request(s) in flight)",
        )
        assert [kit.cursor(rt.engine, i).processed_seq for i in ids] == [8, 0, 0, 0]
        extractions = [b for b in kit.chat_bodies(server) if b["response_format"]["json_schema"]["name"] == "memories"]
        assert len(extractions) == 1  # the first session's; its candidates may also be judged together
    finally:
        signal.end(USER_KEY)
        rt.close()


def _anything_due(rt, now) -> bool:
    with session_scope(rt.engine) as s:
        return bool(due_sessions(s, DueRules.from_settings(rt.settings), now))
