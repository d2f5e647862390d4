"""The HTTP API end to end through a real uvicorn server on 127.0.0.1: the agent loop, roles,
scope isolation on every endpoint, body limits, health, docs, metrics and the busy signal."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass

import httpx
import pytest
from dreamkit import EMBED_DIM, make_index
from onlinekit import (
    ALICE_READER,
    ALICE_WRITER,
    BOB_WRITER,
    TOKENS,
    LiveServer,
    bearer,
    chat,
    online_runtime,
    online_settings,
)
from sqlmodel import select
from typer.testing import CliRunner

from dreamer.core.errors import ConfigError
from dreamer.core.models import Activity, Memory, Session
from dreamer.core.settings import Settings
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.auth import parse_tokens
from dreamer.store import db, leases
from dreamer.store.busy import activity_key
from dreamer.store.db import session_scope
from dreamer.store.user_locks import lock_name

HELPER = "alice-helper-agent-token-0123"
TEAM = "alice-team-t1-token-0123456789"
ALL_TOKENS = TOKENS + [
    {"token": HELPER, "user_id": "alice", "agent_id": "helper", "role": "writer"},
    {"token": TEAM, "user_id": "alice", "team": "t1", "role": "reader"},
]
BOB_FACT = "Bob keeps his bike in the blue shed."


@dataclass
class World:
    rt: object
    app: object
    client: httpx.Client
    bob_memory: str
    alice_memory: str


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("api")
    settings = online_settings(Settings(_env_file=None, data_dir=root / "data"), api_tokens=json.dumps(ALL_TOKENS))
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(settings, engine, scripted, EdgeIndex(root / "edge", EMBED_DIM), llm=False)
        app = create_app(rt)
        try:
            with LiveServer(app) as live, httpx.Client(base_url=live.url, timeout=60) as client:
                client.post(
                    "/v1/sessions/bob-s1/messages",
                    headers=bearer(BOB_WRITER),
                    json={"messages": chat("I prefer my recipes secret.", "ok")},
                ).raise_for_status()
                bob = client.post(
                    "/v1/memories", headers=bearer(BOB_WRITER), json={"text": BOB_FACT, "kind": "profile"}
                )
                client.post(
                    "/v1/sessions/alice-main/messages",
                    headers=bearer(ALICE_WRITER),
                    json={"messages": chat("hello", "hi")},
                ).raise_for_status()
                alice = client.post(
                    "/v1/memories",
                    headers=bearer(ALICE_WRITER),
                    json={"text": "The user keeps a bike at the office.", "kind": "profile"},
                )
                yield World(rt, app, client, bob.json()["memory_id"], alice.json()["memory_id"])
        finally:
            rt.close()
            engine.dispose()


def bob_state(rt) -> tuple:
    with session_scope(rt.engine) as s:
        sess = s.exec(select(Session).where(Session.user_id == "bob")).one()
        mem = s.exec(select(Memory).where(Memory.user_id == "bob")).one()
        return sess.message_count, sess.last_seq, mem.status, mem.text


# --------------------------------------------------------------------------- the agent loop


def test_the_agent_loop(world):
    c, h = world.client, bearer(ALICE_WRITER)

    meter = c.post(
        "/v1/sessions/loop-1/messages",
        headers=h,
        json={"user_id": "alice", "messages": chat("I prefer answers in French.", "D'accord."), "context_tokens": 120},
    )
    assert meter.status_code == 200
    assert meter.json() == {
        "session_id": "loop-1",
        "tokens": 120,
        "flush_point": 128_000 - 20_000 - 4_000,
        "cycle": 0,
        "last_seq": 2,
        "flushed_seq": 0,
        "messages_since_flush": 2,
        "cycle_flushed": False,
        "flush_due": False,
        "trigger": None,
        "flush_scheduled": False,
    }

    stored = c.post(
        "/v1/memories", headers=h, json={"text": "The user wants answers in French.", "session_id": "loop-1"}
    )
    assert stored.status_code == 200
    mid = stored.json()["memory_id"]
    assert (stored.json()["source"], stored.json()["evidence"][0]["external_id"]) == ("agent", "loop-1")

    hits = c.post("/v1/recall", headers=h, json={"query": "answers in French", "k": 3}).json()
    assert hits["mode"] == "hybrid" and hits["hits"][0]["memory_id"] == mid
    block = c.get("/v1/context", headers=h, params={"budget": 200}).json()
    assert mid in block["memory_ids"] and block["text"].startswith('<memory-context id="')

    flushed = c.post("/v1/sessions/loop-1/flush", headers=h).json()
    assert (flushed["status"], flushed["extractor"], flushed["notes"]) == (
        "flushed",
        "rules",
        ["The user prefers answers in French."],
    )
    # the client's own session id and a path inside the workspace, not the server's row or folders
    assert (flushed["session_id"], flushed["path"]) == ("loop-1", f"alice-2bd806c97f0e/memory/{flushed['day']}.md")

    gone = c.delete(f"/v1/memories/{mid}", headers=h, params={"reason": "changed their mind"})
    assert (gone.status_code, gone.json()["status"]) == (200, "forgotten")
    assert mid not in [x["memory_id"] for x in c.post("/v1/recall", headers=h, json={"query": "French"}).json()["hits"]]

    status = c.get("/v1/status", headers=h).json()
    assert (status["user_id"], status["role"], status["recall"], status["extractor"]) == (
        "alice",
        "writer",
        "hybrid",
        "rules",
    )
    assert status["memories"]["forgotten"] >= 1 and status["daily_notes"] >= 1


# --------------------------------------------------------------------------- tokens and roles


ENDPOINTS = [
    ("POST", "/v1/sessions/any/messages", {"messages": []}),
    ("POST", "/v1/sessions/alice-main/flush", None),
    ("POST", "/v1/recall", {"query": "bike"}),
    ("GET", "/v1/context", None),
    ("POST", "/v1/memories", {"text": "The user likes tea."}),
    ("DELETE", "/v1/memories/whatever", None),
    ("GET", "/v1/status", None),
    ("POST", "/v1/context/compact", {"messages": [{"role": "user", "content": "hello"}]}),
    ("GET", "/v1/context/offloaded/ofl_0123", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS, ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("token", [None, "not-a-token-at-all-000000"])
def test_no_valid_token_is_401(world, method, path, body, token):
    r = world.client.request(method, path, json=body, headers=bearer(token) if token else {})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [e for e in ENDPOINTS if e[0] != "GET" and e[1] != "/v1/recall"],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_reader_that_writes_gets_403(world, method, path, body):
    path = path.replace("whatever", world.alice_memory)
    before = world.client.get("/v1/status", headers=bearer(ALICE_READER)).json()
    r = world.client.request(method, path, json=body, headers=bearer(ALICE_READER))
    assert r.status_code == 403
    assert world.client.get("/v1/status", headers=bearer(ALICE_READER)).json() == before


def test_a_reader_reads(world):
    h = bearer(ALICE_READER)
    hits = world.client.post("/v1/recall", headers=h, json={"query": "bike office"}).json()["hits"]
    assert world.alice_memory in [x["memory_id"] for x in hits]
    assert world.client.get("/v1/context", headers=h).status_code == 200
    assert world.client.get("/v1/status", headers=h).json()["role"] == "reader"


# --------------------------------------------------------------------------- scope isolation


def _cross(world) -> list[tuple[str, str, str, dict | None, int]]:
    """(token, method, path, body, status): alice's tokens reaching for bob's (or another agent's) data."""
    return [
        (ALICE_WRITER, "POST", "/v1/sessions/bob-s1/messages", {"messages": []}, 404),
        (ALICE_WRITER, "POST", "/v1/sessions/alice-new/messages", {"user_id": "bob", "messages": chat("as bob")}, 403),
        (HELPER, "POST", "/v1/sessions/alice-main/messages", {"messages": chat("other agent")}, 404),
        (HELPER, "POST", "/v1/sessions/helper-1/messages", {"agent_id": "main", "messages": chat("as main")}, 403),
        (ALICE_WRITER, "POST", "/v1/sessions/bob-s1/flush", None, 404),
        (HELPER, "POST", "/v1/sessions/alice-main/flush", None, 404),
        (ALICE_WRITER, "DELETE", f"/v1/memories/{world.bob_memory}", None, 404),
        (HELPER, "DELETE", f"/v1/memories/{world.alice_memory}", None, 404),
        (ALICE_WRITER, "POST", "/v1/memories", {"text": "The user is Bob.", "session_id": "bob-s1"}, 404),
        (ALICE_WRITER, "POST", "/v1/memories", {"text": "The user is Bob.", "user_id": "bob"}, 422),
        (ALICE_WRITER, "POST", "/v1/recall", {"query": BOB_FACT, "k": 50}, 200),
        (ALICE_WRITER, "POST", "/v1/recall", {"query": "bike shed", "user_id": "bob"}, 422),
        (ALICE_WRITER, "GET", "/v1/context?budget=5000", None, 200),
        (ALICE_WRITER, "GET", "/v1/status", None, 200),
        (HELPER, "POST", "/v1/recall", {"query": "bike office", "k": 50}, 200),
    ]


CROSS_IDS = [
    "append-nothing-to-bobs",
    "append-as-bob",
    "append-other-agents-session",
    "append-as-other-agent",
    "flush-bobs",
    "flush-other-agents",
    "forget-bobs",
    "forget-other-agents",
    "remember-on-bobs-session",
    "remember-as-bob",
    "recall-bobs-fact",
    "recall-as-bob",
    "context",
    "status",
    "recall-other-agents",
]


@pytest.mark.parametrize("case", range(len(CROSS_IDS)), ids=CROSS_IDS)
def test_cross_scope_access_is_refused(world, case):
    """Writes are refused (403/404, 422 for a scope field in the body); reads answer without the other's data."""
    token, method, path, body, expected = _cross(world)[case]
    before = bob_state(world.rt)
    alice_before = world.client.get("/v1/status", headers=bearer(ALICE_WRITER)).json()

    r = world.client.request(method, path, json=body, headers=bearer(token))

    assert r.status_code == expected
    leaked = [world.bob_memory, BOB_FACT, "bob-s1", "recipes secret"] + (
        [world.alice_memory] if token == HELPER else []
    )
    echoed = path + json.dumps(body)
    assert not any(x in r.text for x in leaked if x not in echoed)
    assert bob_state(world.rt) == before
    assert world.client.get("/v1/status", headers=bearer(ALICE_WRITER)).json() == alice_before


def test_a_session_of_another_user_is_404(world):
    r = world.client.post("/v1/sessions/bob-s1/flush", headers=bearer(ALICE_WRITER))
    assert (r.status_code, r.json()) == (404, {"detail": "no session bob-s1"})
    r = world.client.delete(f"/v1/memories/{world.bob_memory}", headers=bearer(ALICE_WRITER))
    assert r.status_code == 404


def test_status_counts_only_the_tokens_own_agent_or_team(world):
    c = world.client
    c.post(
        "/v1/sessions/status-1/messages",
        headers=bearer(ALICE_WRITER),
        json={"messages": chat("I prefer tea to coffee.", "Noted.")},
    ).raise_for_status()
    assert c.post("/v1/sessions/status-1/flush", headers=bearer(ALICE_WRITER)).json()["notes"] != []

    alice = c.get("/v1/status", headers=bearer(ALICE_WRITER)).json()
    counts = [
        (x["sessions"], x["messages"], x["daily_notes"])
        for x in (c.get("/v1/status", headers=bearer(t)).json() for t in (HELPER, TEAM))
    ]

    assert alice["sessions"] >= 1 and alice["daily_notes"] >= 1
    assert counts == [(0, 0, 0), (0, 0, 0)]


def test_each_user_has_their_own_session_ids(world):
    """An id another user uses answers as one nobody uses (nothing tells whether it is taken),
    and a user's messages under it make a session of their own."""
    c = world.client
    c.post("/v1/sessions/shared-7/messages", headers=bearer(BOB_WRITER), json={"messages": chat("Bob's words.")})

    unused = c.post("/v1/sessions/never-used/messages", headers=bearer(ALICE_WRITER), json={})
    taken = c.post("/v1/sessions/shared-7/messages", headers=bearer(ALICE_WRITER), json={})
    mine = c.post(
        "/v1/sessions/shared-7/messages", headers=bearer(ALICE_WRITER), json={"messages": chat("Alice's words.")}
    )

    assert (unused.status_code, unused.json()) == (404, {"detail": "no session never-used"})
    assert (taken.status_code, taken.json()) == (404, {"detail": "no session shared-7"})
    assert (mine.status_code, mine.json()["last_seq"]) == (200, 1)
    with session_scope(world.rt.engine) as s:
        rows = s.exec(
            select(Session.user_id, Session.message_count)
            .where(Session.external_id == "shared-7")
            .order_by(Session.user_id)
        ).all()
    assert [tuple(r) for r in rows] == [("alice", 1), ("bob", 1)]


# --------------------------------------------------------------------------- validation and limits


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/sessions/v1/messages", {"messages": [{"role": "robot", "content": "x"}]}),
        ("/v1/sessions/v1/messages", {"messages": [], "context_tokens": -1}),
        ("/v1/sessions/v1/messages", {"messages": [], "compacted": True}),
        ("/v1/recall", {"query": ""}),
        ("/v1/recall", {"query": "x", "k": 0}),
        ("/v1/recall", {"query": "x", "kinds": ["gossip"]}),
        ("/v1/memories", {"text": "The user is on the team.", "kind": "decision"}),
        ("/v1/memories", {"text": "ok"}),
    ],
)
def test_invalid_bodies_are_422(world, path, body):
    assert world.client.post(path, json=body, headers=bearer(ALICE_WRITER)).status_code == 422


def test_a_10_mb_body_is_413_and_the_server_lives_on(world):
    big = b'{"messages": [{"role": "user", "content": "' + b"x" * 10_000_000 + b'"}]}'
    r = world.client.post("/v1/sessions/big/messages", content=big, headers=bearer(ALICE_WRITER))
    assert r.status_code == 413

    def chunks():
        for _ in range(10):
            yield b"x" * 1_000_000

    streamed = world.client.post(
        "/v1/sessions/big/messages",
        content=chunks(),
        headers=bearer(ALICE_WRITER) | {"content-type": "application/json"},
    )
    assert streamed.status_code == 413
    assert world.client.get("/healthz").json() == {"ok": True}
    with session_scope(world.rt.engine) as s:
        assert s.exec(select(Session).where(Session.external_id == "big")).first() is None


def test_healthz_docs_and_metrics(world):
    assert world.client.get("/healthz").json() == {"ok": True}
    docs = world.client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    paths = world.client.get("/openapi.json").json()["paths"]
    assert {"/v1/recall", "/v1/context", "/v1/memories", "/v1/sessions/{session_id}/messages"} <= set(paths)
    world.client.post("/v1/recall", headers=bearer(ALICE_READER), json={"query": "bike"})

    text = world.client.get("/metrics").text

    assert 'dreamer_http_requests_total{method="POST",route="/v1/recall",status="200"}' in text
    assert 'dreamer_http_request_seconds_count{method="POST",route="/v1/recall"}' in text
    assert 'route="/docs"' in text
    assert 'dreamer_llm_tokens_total{kind="prompt",source="flush"}' in text
    assert "# TYPE dreamer_dream_runs_total counter" in text
    assert "# TYPE dreamer_flushes_total counter" in text


# --------------------------------------------------------------------------- busy signal and start-up


def test_requests_mark_the_agent_busy_while_they_run(settings, sqlite_engine, tmp_path):
    entered, release = threading.Event(), threading.Event()

    def script(body):
        entered.set()
        release.wait(30)
        return Reply.json({"notes": []})

    with ScriptedServer(script, embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(online_settings(settings), sqlite_engine, scripted, make_index("edge", tmp_path))
        try:
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as c:
                c.get("/healthz")
                assert rt.busy.busy_reason() is None  # health checks do not count as the agent
                c.post("/v1/sessions/s/messages", headers=bearer(ALICE_WRITER), json={"messages": chat("hi")})
                worker = threading.Thread(target=lambda: c.post("/v1/sessions/s/flush", headers=bearer(ALICE_WRITER)))
                worker.start()
                assert entered.wait(30)
                assert rt.busy.busy_reason() == "1 request(s) in flight"
                release.set()
                worker.join(30)
                assert rt.busy.busy_reason().startswith("activity within")
            with session_scope(rt.engine) as s:
                assert [(a.key, a.in_flight) for a in s.exec(select(Activity))] == [(activity_key("alice"), 0)]
        finally:
            release.set()
            rt.close()


def test_insecure_single_user_mode(settings, sqlite_engine, tmp_path):
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(
            online_settings(settings, api_tokens=""), sqlite_engine, scripted, make_index("edge", tmp_path), llm=False
        )
        try:
            with pytest.raises(ConfigError, match="no API tokens"):
                create_app(rt)
            with LiveServer(create_app(rt, insecure_user="solo")) as live:
                r = httpx.post(f"{live.url}/v1/memories", json={"text": "The user prefers tea."}, timeout=60)
                assert r.status_code == 200
                assert httpx.get(f"{live.url}/v1/status", timeout=60).json()["user_id"] == "solo"
        finally:
            rt.close()


def test_a_write_that_cannot_get_its_users_consolidation_lock_is_503(settings, sqlite_engine, tmp_path):
    """A deployment with a Qdrant server (the index here handed in): the lock is a lease row."""
    quick = online_settings(settings, api_tokens="", user_lock_wait_seconds=0, qdrant_url="http://127.0.0.1:1")
    assert leases.acquire(sqlite_engine, lock_name("solo"), "a dream pass elsewhere", 600)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        index = make_index("edge", tmp_path)
        rt = online_runtime(quick, sqlite_engine, scripted, index, llm=False)
        try:
            with LiveServer(create_app(rt, insecure_user="solo")) as live:
                r = httpx.post(f"{live.url}/v1/memories", json={"text": "The user prefers tea."}, timeout=60)
        finally:
            rt.close()
            index.close()
    assert r.status_code == 503
    assert r.json()["detail"].startswith("user 'solo': another writer kept consolidating their memories; gave up after")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"token": "x"}', "JSON list"),
        ('[{"token": "short", "user_id": "a", "role": "writer"}]', "entry 0: token"),
        ('[{"token": "long-enough-token-123", "user_id": "a", "role": "admin"}]', "entry 0: role"),
        ('[{"token": "long-enough-token-123", "user_id": "a", "role": "reader", "scope": "*"}]', "entry 0: scope"),
        (
            '[{"token": "long-enough-token-123", "user_id": "a", "role": "reader"},'
            ' {"token": "long-enough-token-123", "user_id": "b", "role": "reader"}]',
            "twice",
        ),
    ],
)
def test_bad_tokens_are_a_config_error(raw, problem):
    with pytest.raises(ConfigError, match=problem) as info:
        parse_tokens(raw)
    assert "long-enough-token-123" not in str(info.value)


def test_serve_refuses_to_start_without_tokens(tmp_path, monkeypatch):
    from dreamer.cli import app, cabinet, online, records  # noqa: F401  (register commands)

    monkeypatch.setenv("DREAMER_API_TOKENS", "")
    result = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "d"), "serve"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "error: no API tokens configured: set DREAMER_API_TOKENS, or pass --insecure-single-user USER for a "
        "local single-user server"
    ]
