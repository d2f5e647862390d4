"""Busy per user and per agent: one scope's traffic holds back only its own sessions, reads
mark nothing busy unless declared in flight, and both signals (SQL and real Redis) agree."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from conftest import REDIS_URL, need_service
from dreamkit import extraction_script, make_index, make_runtime
from onlinekit import ALICE_WRITER, LiveServer, bearer, chat, online_runtime, online_settings
from sqlmodel import select

from dreamer.core.models import Cursor, DreamRun
from dreamer.engine.dream import dream_pass, run_pass
from dreamer.engine.jobs import fan_out
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.middleware import marks_busy
from dreamer.store.busy import RedisBusySignal, SqlBusySignal, activity_key
from dreamer.store.db import session_scope

FILLER = ["ok", "sure", "fine", "thanks"]
LEFT = "1 session(s) left due: their owner is busy (1 request(s) in flight)"


def session_with(line: str) -> list[dict]:
    texts: list[str] = []
    for i, said in enumerate([line, *FILLER[:3]]):
        texts += [said, f"reply {i}"]
    return chat(*texts)


def processed(engine, session_id: int) -> int:
    with session_scope(engine) as s:
        return s.get(Cursor, session_id).processed_seq


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        srv.set_script(extraction_script())
        yield srv


@pytest.fixture(params=["sql", "redis"])
def signal(request, engine):
    if request.param == "sql":
        yield SqlBusySignal(engine, window_seconds=60)
        return
    need_service("Redis", "127.0.0.1", 6379)
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    prefix = f"dreamer-test:{uuid.uuid4().hex[:12]}"
    yield RedisBusySignal(client, window_seconds=60, prefix=prefix)
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_a_busy_users_sessions_are_left_due_and_the_others_dreamed_in_the_same_pass(
    settings, engine, server, tmp_path, signal
):
    rt = make_runtime(settings, engine, server, make_index("edge", tmp_path), busy=signal)
    try:
        alice = record_messages(engine, "a", session_with("I prefer green tea."), user_id="alice").session_id
        bob = record_messages(engine, "b", session_with("I prefer black coffee."), user_id="bob").session_id
        bots = record_messages(engine, "c", session_with("I prefer jazz."), user_id="bob", agent_id="bot").session_id
        signal.begin(activity_key("alice"))
        signal.begin(activity_key("bob", "bot"))

        dreamed = run_pass(rt)

        run = dreamed.run
        assert (run.status, run.sessions) == ("partial", 1)
        assert run.error == "2 session(s) left due: their owner is busy (1 request(s) in flight)"
        assert dreamed.stopped_busy()  # the daemon retries them after the backoff
        assert [processed(engine, sid) for sid in (alice, bob, bots)] == [0, 8, 0]

        signal.end(activity_key("alice"))  # alice is idle again only once her window has passed
        assert (dream_pass(rt).sessions, processed(engine, alice)) == (0, 0)
        assert (dream_pass(rt, force=True).sessions, processed(engine, alice)) == (2, 8)
    finally:
        rt.close()


def test_a_pass_with_only_busy_owners_due_is_skipped(settings, engine, server, tmp_path, signal):
    rt = make_runtime(settings, engine, server, make_index("edge", tmp_path), busy=signal)
    try:
        sid = record_messages(engine, "a", session_with("I prefer green tea."), user_id="alice").session_id
        signal.begin(activity_key("alice"))
        run = dream_pass(rt)
        assert (run.status, run.error, processed(engine, sid)) == ("skipped_busy", "1 request(s) in flight", 0)
        carol = record_messages(engine, "b", session_with("I prefer black coffee."), user_id="carol").session_id
        run = dream_pass(rt)  # carol is idle: the pass runs, and leaves alice's session
        assert (run.status, run.sessions, processed(engine, carol), processed(engine, sid)) == ("partial", 1, 8, 0)
        assert dream_pass(rt).status == "skipped_busy"
    finally:
        rt.close()


def test_workers_fan_out_only_the_idle_owners_sessions(settings, engine, server, tmp_path):
    signal = SqlBusySignal(engine, window_seconds=60)
    rt = make_runtime(settings, engine, server, make_index("edge", tmp_path), busy=signal)
    try:
        alice = record_messages(engine, "a", session_with("I prefer green tea."), user_id="alice").session_id
        bob = record_messages(engine, "b", session_with("I prefer black coffee."), user_id="bob").session_id
        signal.begin(activity_key("alice"))
        sent: list[int] = []
        assert (fan_out(rt, sent.append, trigger="beat").skipped, sent) == (None, [bob])
        assert alice not in sent
    finally:
        rt.close()


@pytest.mark.parametrize(
    ("method", "path", "declared", "marks"),
    [
        ("GET", "/v1/status", None, False),
        ("GET", "/v1/context", None, False),
        ("POST", "/v1/recall", None, False),
        ("GET", "/healthz", b"1", False),  # outside /v1/: never
        ("GET", "/v1/context", b"1", True),
        ("POST", "/v1/recall", b"true", True),
        ("POST", "/v1/sessions/s/messages", None, True),
        ("POST", "/v1/sessions/s/messages", b"0", False),
        ("DELETE", "/v1/memories/m", None, True),
        ("POST", "/v1/memories", b"maybe", True),  # not a yes or a no: the route decides
    ],
)
def test_which_requests_mark_their_scope_busy(method, path, declared, marks):
    assert marks_busy(method, path, declared) is marks


def test_one_users_polling_never_holds_back_another_users_pass(settings, engine, tmp_path):
    """Alice's client polls status, context and recall; none of it marks anyone busy, so the
    pass right after dreams bob's session and hers. Declared in flight, her read holds back
    only her own session."""
    tokens = [
        {"token": ALICE_WRITER, "user_id": "alice", "role": "writer"},
        {"token": "alice-bot-token-0123456789", "user_id": "alice", "agent_id": "bot", "role": "writer"},
    ]
    st = online_settings(settings, api_tokens=json.dumps(tokens))
    with ScriptedServer(embed_dim=64) as scripted:
        scripted.set_script(extraction_script())
        rt = online_runtime(st, engine, scripted, make_index("edge", tmp_path))
        try:
            alice = record_messages(engine, "a", session_with("I prefer green tea."), user_id="alice").session_id
            bob = record_messages(engine, "b", session_with("I prefer black coffee."), user_id="bob").session_id
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as c:
                for _ in range(5):
                    assert c.get("/v1/status", headers=bearer(ALICE_WRITER)).status_code == 200
                    assert c.get("/v1/context", headers=bearer(ALICE_WRITER)).status_code == 200
                    assert c.post("/v1/recall", headers=bearer(ALICE_WRITER), json={"query": "tea"}).status_code == 200
                assert rt.busy.busy_keys() == {}
                bot = bearer("alice-bot-token-0123456789") | {"Dreamer-In-Flight": "1"}
                assert c.get("/v1/context", headers=bot).status_code == 200
                assert rt.busy.busy_keys() == {activity_key("alice", "bot"): "activity within the last 60 s"}
                assert c.get("/v1/context", headers=bearer(ALICE_WRITER) | {"Dreamer-In-Flight": "1"}).is_success
            assert set(rt.busy.busy_keys()) == {activity_key("alice", "bot"), activity_key("alice")}
            run = dream_pass(rt)
            assert (run.sessions, processed(engine, bob), processed(engine, alice)) == (1, 8, 0)
            with session_scope(engine) as s:
                assert s.exec(select(DreamRun.status)).all() == ["partial"]
        finally:
            rt.close()
