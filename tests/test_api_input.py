"""Hostile input to the HTTP API through a real uvicorn server: unpaired surrogates and NUL
characters, messages over `max_message_bytes`, empty appends, and the insecure single user's id."""

from __future__ import annotations

import json
from dataclasses import dataclass

import httpx
import pytest
from clikit import assert_one_error_line, run
from dreamkit import EMBED_DIM
from onlinekit import ALICE_WRITER, LiveServer, bearer, chat, free_port, online_runtime, online_settings
from sqlalchemy import func
from sqlmodel import select

from dreamer.core.errors import ConfigError
from dreamer.core.models import Memory, Message, Session
from dreamer.core.settings import Settings
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.auth import parse_tokens
from dreamer.store import db
from dreamer.store.db import session_scope

LIMIT = 5000
UNICODE = "Input should be a valid string, unable to parse raw data as a unicode string"
UNSTORABLE = "Value error, contains a NUL character or an unpaired surrogate"
METER_AT_2 = {
    "session_id": "kept",
    "tokens": 900,
    "flush_point": 104_000,
    "cycle": 0,
    "last_seq": 2,
    "flushed_seq": 0,
    "messages_since_flush": 2,
    "cycle_flushed": False,
    "flush_due": False,
    "trigger": None,
    "flush_scheduled": False,
}


@dataclass
class World:
    rt: object
    client: httpx.Client


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("api-input")
    settings = online_settings(Settings(_env_file=None, data_dir=root / "data"), max_message_bytes=LIMIT)
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(settings, engine, scripted, EdgeIndex(root / "edge", EMBED_DIM), llm=False)
        try:
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as client:
                client.post(
                    "/v1/sessions/kept/messages", headers=bearer(ALICE_WRITER), json={"messages": chat("hello", "hi")}
                ).raise_for_status()
                yield World(rt, client)
        finally:
            rt.close()
            engine.dispose()


def send(world: World, path: str, body: dict) -> httpx.Response:
    """POST `body` as ASCII JSON: a lone surrogate travels as its raw \\uXXXX escape."""
    return world.client.post(
        path,
        content=json.dumps(body).encode("ascii"),
        headers=bearer(ALICE_WRITER) | {"content-type": "application/json"},
    )


def stored(rt) -> tuple[int, int, int]:
    """(sessions, messages, memories) in the store."""
    with session_scope(rt.engine) as s:
        return tuple(s.exec(select(func.count()).select_from(t)).one() for t in (Session, Message, Memory))


def messages_of(rt, external_id: str) -> list[tuple]:
    with session_scope(rt.engine) as s:
        sess = s.exec(select(Session).where(Session.external_id == external_id)).one()
        rows = s.exec(select(Message).where(Message.session_id == sess.id).order_by(Message.seq)).all()
        return [(m.seq, m.role, m.content, m.name, m.tool_call_id) for m in rows]


# --------------------------------------------------------------------------- surrogates and NUL


def unicode_error(loc: list, echoed: str) -> dict:
    return {"type": "string_unicode", "loc": ["body", *loc], "msg": UNICODE, "input": echoed}


REFUSED = [
    (
        "/v1/recall",
        {"query": "tea", "k": "\ud800"},
        {"type": "int_type", "loc": ["body", "k"], "msg": "Input should be a valid integer", "input": "\ufffd"},
    ),
    (
        "/v1/memories",
        {"text": "The user likes tea.", "session_id": "s\ud800"},
        unicode_error(["session_id"], "s\ufffd"),
    ),
    ("/v1/memories", {"text": "The user likes tea.", "\ud800": 1}, unicode_error([], "\ufffd")),
    (
        "/v1/sessions/kept/messages",
        {"messages": [{"role": "\ud800", "content": "hi"}]},
        unicode_error(["messages", 0, "role"], "\ufffd"),
    ),
    (
        "/v1/sessions/kept/messages",
        {"user_id": "al\ud800ce", "messages": chat("hi")},
        unicode_error(["user_id"], "al\ufffdce"),
    ),
    (
        "/v1/sessions/kept/messages",
        {"agent_id": "ma\x00in", "messages": chat("hi")},
        {
            "type": "value_error",
            "loc": ["body", "agent_id"],
            "msg": UNSTORABLE,
            "input": "ma\ufffdin",
            "ctx": {"error": {}},
        },
    ),
]
REFUSED_IDS = ["recall-k", "memory-session-id", "unknown-key", "message-role", "append-user-id", "append-agent-id-nul"]


@pytest.mark.parametrize(("path", "body", "error"), REFUSED, ids=REFUSED_IDS)
def test_an_unstorable_identifier_or_a_surrogate_in_a_non_text_field_is_422(world, path, body, error):
    """The error echoes the input with U+FFFD in place of what JSON in UTF-8 cannot carry."""
    before = stored(world.rt)

    r = send(world, path, body)

    assert (r.status_code, r.json()) == (422, {"detail": [error]})
    assert stored(world.rt) == before


def test_a_surrogate_in_a_query_becomes_the_replacement_character(world):
    r = send(world, "/v1/recall", {"query": "green \ud800tea"})
    assert (r.status_code, r.json()["query"]) == (200, "green \ufffdtea")


def test_a_surrogate_or_nul_in_a_memory_is_stored_as_the_replacement_character(world):
    r = send(world, "/v1/memories", {"text": "The user likes \ud800jasmine\x00 tea.", "kind": "preference"})
    assert r.status_code == 200
    assert r.json()["text"] == "The user likes \ufffdjasmine\ufffd tea."
    with session_scope(world.rt.engine) as s:
        assert s.get(Memory, r.json()["memory_id"]).text == "The user likes \ufffdjasmine\ufffd tea."


def test_a_nul_in_a_forget_reason_is_stored_as_the_replacement_character(world):
    from dreamer.core.models import MemoryEvent

    made = send(world, "/v1/memories", {"text": "The user likes oolong tea.", "kind": "preference"}).json()
    r = world.client.delete(
        f"/v1/memories/{made['memory_id']}", params={"reason": "asked\x00 to"}, headers=bearer(ALICE_WRITER)
    )
    assert (r.status_code, r.json()["status"]) == (200, "forgotten")
    with session_scope(world.rt.engine) as s:
        reasons = s.exec(
            select(MemoryEvent.reason)
            .where(MemoryEvent.memory_id == made["memory_id"])
            .where(MemoryEvent.event == "forget")
        ).all()
    assert reasons == ["asked\ufffd to"]


def test_a_forget_of_an_unstorable_memory_id_is_422(world):
    before = stored(world.rt)
    r = world.client.delete("/v1/memories/abc%00def", headers=bearer(ALICE_WRITER))
    assert (r.status_code, r.json()) == (422, {"detail": "memory_id contains a NUL character or an unpaired surrogate"})
    assert stored(world.rt) == before


def post_raw(world: World, path: str, content: bytes, content_type: str = "application/json") -> httpx.Response:
    return world.client.post(path, content=content, headers=bearer(ALICE_WRITER) | {"content-type": content_type})


def only_error(r: httpx.Response) -> tuple:
    """(status, type, loc, input) of a response's one validation error."""
    [error] = r.json()["detail"]
    return r.status_code, error["type"], error["loc"], error.get("input")


NOT_NUMBERS = [  # Python's json reads NaN, Infinity and 1e400 (an infinity); none is a number a field takes
    ("/v1/recall", b'{"query": "tea", "k": NaN}', ("int_type", ["body", "k"], "nan")),
    ("/v1/recall", b'{"query": "tea", "k": 1e400}', ("int_type", ["body", "k"], "inf")),
    ("/v1/memories", b'{"text": NaN}', ("string_type", ["body", "text"], "nan")),
    ("/v1/sessions/kept/messages", b'{"context_tokens": -Infinity}', ("int_type", ["body", "context_tokens"], "-inf")),
]


@pytest.mark.parametrize(("path", "content", "error"), NOT_NUMBERS, ids=["k-nan", "k-1e400", "text-nan", "figure-inf"])
def test_nan_or_an_infinity_is_422_not_500(world, path, content, error):
    before = stored(world.rt)
    assert only_error(post_raw(world, path, content)) == (422, *error)
    assert stored(world.rt) == before


def test_a_body_that_is_not_utf8_is_422_not_500(world):
    r = post_raw(world, "/v1/recall", b"\xff\xfe", "text/plain")
    assert only_error(r) == (422, "model_attributes_type", ["body"], "\ufffd\ufffd")


@pytest.mark.parametrize(
    ("path", "body", "field", "given"),
    [
        ("/v1/sessions/kept/messages", {"agent_id": "ma\x1bin", "messages": chat("hi")}, "agent_id", "ma\x1bin"),
        ("/v1/memories", {"text": "The user likes tea.", "session_id": "s\n1"}, "session_id", "s\n1"),
    ],
)
def test_a_control_character_in_an_identifier_is_422(world, path, body, field, given):
    before = stored(world.rt)
    r = send(world, path, body)
    assert (r.status_code, r.json()) == (
        422,
        {
            "detail": [
                {
                    "type": "value_error",
                    "loc": ["body", field],
                    "msg": "Value error, contains a control character or a line break",
                    "input": given,
                    "ctx": {"error": {}},
                }
            ]
        },
    )
    assert stored(world.rt) == before


def test_a_line_break_in_a_session_path_is_422(world):
    before = stored(world.rt)
    r = world.client.post("/v1/sessions/a%0Ab/messages", json={"messages": chat("hi")}, headers=bearer(ALICE_WRITER))
    assert (r.status_code, r.json()) == (422, {"detail": "session_id contains a control character or a line break"})
    assert stored(world.rt) == before


@pytest.mark.parametrize("path", ["/v1/sessions/a%00b/messages", "/v1/sessions/a%00b/flush"])
def test_a_nul_in_a_session_path_is_422(world, path):
    before = stored(world.rt)
    r = world.client.post(path, json={"messages": chat("hi")}, headers=bearer(ALICE_WRITER))
    assert (r.status_code, r.json()) == (
        422,
        {"detail": "session_id contains a NUL character or an unpaired surrogate"},
    )
    assert stored(world.rt) == before


WRONG_TYPES = [
    ("/v1/recall", {"query": "tea", "k": True}, ("int_type", ["body", "k"], True)),
    ("/v1/recall", {"query": "tea", "k": "5"}, ("int_type", ["body", "k"], "5")),
    ("/v1/recall", {"query": "tea", "k": 2.0}, ("int_type", ["body", "k"], 2.0)),
    ("/v1/recall", {"query": "tea", "since": "1"}, ("value_error", ["body", "since"], "1")),
    ("/v1/recall", {"query": "tea", "until": 1700000000}, ("value_error", ["body", "until"], 1700000000)),
    ("/v1/recall", {"query": "tea", "kinds": []}, ("too_short", ["body", "kinds"], [])),
    ("/v1/sessions/kept/messages", {"context_tokens": True}, ("int_type", ["body", "context_tokens"], True)),
    ("/v1/sessions/kept/messages", {"context_tokens": "900"}, ("int_type", ["body", "context_tokens"], "900")),
    (
        "/v1/sessions/kept/messages",
        {"messages": chat("hi"), "compacted": "yes"},
        ("bool_type", ["body", "compacted"], "yes"),
    ),
    ("/v1/sessions/kept/messages", {"messages": chat("hi"), "compacted": 1}, ("bool_type", ["body", "compacted"], 1)),
    ("/v1/memories", {"text": "   ...   "}, ("value_error", ["body", "text"], "   ...   ")),
    ("/v1/memories", {"text": "\u200b\u200b\u200b\u200b"}, ("value_error", ["body", "text"], "\u200b" * 4)),
    (
        "/v1/memories",
        {"text": "The user likes tea.", "session_id": ""},
        ("string_too_short", ["body", "session_id"], ""),
    ),
]
WRONG_TYPE_IDS = [
    "k-true",
    "k-string",
    "k-float",
    "since-number-string",
    "until-number",
    "kinds-empty",
    "figure-true",
    "figure-string",
    "compacted-string",
    "compacted-1",
    "text-punctuation",
    "text-zero-width",
    "session-id-empty",
]


@pytest.mark.parametrize(("path", "body", "error"), WRONG_TYPES, ids=WRONG_TYPE_IDS)
def test_a_value_of_the_wrong_type_or_without_content_is_422(world, path, body, error):
    """Nothing is coerced: a boolean is not a count, a number is not a time, an empty list is not a filter."""
    before = stored(world.rt)
    assert only_error(send(world, path, body)) == (422, *error)
    assert stored(world.rt) == before


def test_a_422_echoes_little_of_a_large_input(world):
    """At most 20 problems are listed, and an input is echoed only when it is short."""
    many = {"messages": [{"role": "robot", "content": "x" * 1000}] * 30}
    r = send(world, "/v1/sessions/kept/messages", many)
    detail = r.json()["detail"]
    assert (r.status_code, len(detail), detail[-1]) == (
        422,
        21,
        {"type": "too_many_errors", "loc": [], "msg": "10 more not shown"},
    )
    assert [d["input"] for d in detail[:2]] == ["robot", "robot"]

    r = send(world, "/v1/sessions/kept/messages", {"messages": [{"role": "user", "content": "x"}] * 1001})
    assert only_error(r) == (422, "too_long", ["body", "messages"], "an array of 1001 items, not shown")
    assert len(r.content) < 1000


def test_a_surrogate_in_a_message_name_or_tool_call_id_is_stored_as_the_replacement_character(world):
    r = send(
        world,
        "/v1/sessions/named/messages",
        {
            "messages": [
                {"role": "user", "content": "hi \ud800", "name": "\ud800ada"},
                {"role": "tool", "content": "42", "tool_call_id": "call\udc00-1"},
            ]
        },
    )
    assert (r.status_code, r.json()["last_seq"]) == (200, 2)
    assert messages_of(world.rt, "named") == [
        (1, "user", "hi \ufffd", "\ufffdada", None),
        (2, "tool", "42", None, "call\ufffd-1"),
    ]


# --------------------------------------------------------------------------- max_message_bytes


def test_a_message_over_max_message_bytes_is_413_and_nothing_is_stored(world):
    before, kept = stored(world.rt), messages_of(world.rt, "kept")
    body = {"messages": chat("fine", "x" * 6000, "also fine")}

    r = send(world, "/v1/sessions/kept/messages", body)
    fresh = send(world, "/v1/sessions/never-made/messages", body)

    detail = "message 2 of 3 refused (message is 6000 bytes, over the 5000-byte limit, max_message_bytes): nothing was stored"
    assert (r.status_code, r.json()) == (413, {"detail": detail})
    assert (fresh.status_code, fresh.json()) == (413, {"detail": detail})
    assert stored(world.rt) == before
    assert messages_of(world.rt, "kept") == kept


def test_tool_call_arguments_count_towards_max_message_bytes(world):
    before = stored(world.rt)
    call = {"id": "c1", "type": "function", "function": {"name": "save", "arguments": "y" * 2001}}

    r = send(
        world,
        "/v1/sessions/tools/messages",
        {"messages": [{"role": "assistant", "content": "x" * 3000, "tool_calls": [call]}]},
    )

    assert (r.status_code, r.json()) == (
        413,
        {
            "detail": "message 1 of 1 refused (message is 5001 bytes, over the 5000-byte limit, max_message_bytes): nothing was stored"
        },
    )
    assert stored(world.rt) == before


def test_max_message_bytes_counts_utf8_bytes_and_admits_a_message_at_the_limit(world):
    over = send(world, "/v1/sessions/accents/messages", {"messages": chat("é" * 2501)})
    at = send(world, "/v1/sessions/accents/messages", {"messages": chat("é" * 2500)})

    assert (over.status_code, over.json()) == (
        413,
        {
            "detail": "message 1 of 1 refused (message is 5002 bytes, over the 5000-byte limit, max_message_bytes): nothing was stored"
        },
    )
    assert (at.status_code, at.json()["last_seq"]) == (200, 1)
    assert messages_of(world.rt, "accents") == [(1, "user", "é" * 2500, None, None)]


# --------------------------------------------------------------------------- appends without messages


def test_an_empty_append_to_an_unknown_session_is_404_and_creates_nothing(world):
    before = stored(world.rt)

    empty = send(world, "/v1/sessions/ghost/messages", {})
    figure = send(world, "/v1/sessions/ghost/messages", {"messages": [], "context_tokens": 900})

    assert (empty.status_code, empty.json()) == (404, {"detail": "no session ghost"})
    assert (figure.status_code, figure.json()) == (404, {"detail": "no session ghost"})
    assert stored(world.rt) == before


def test_an_empty_append_to_a_known_session_reads_the_meter(world):
    before = stored(world.rt)

    r = send(world, "/v1/sessions/kept/messages", {"context_tokens": 900})

    assert (r.status_code, r.json()) == (200, METER_AT_2)
    assert stored(world.rt) == before


# --------------------------------------------------------------------------- the insecure single user


@pytest.mark.parametrize(
    ("user", "problem"),
    [
        ("u" * 300, "String should have at most 255 characters"),
        ("ada\x00", UNSTORABLE),
        ("ada\r", "Value error, contains a control character or a line break"),
        ("ada\udcff", UNICODE),
    ],
)
def test_an_insecure_single_user_id_is_validated_like_a_token(world, user, problem):
    with pytest.raises(ConfigError) as info:
        create_app(world.rt, insecure_user=user)
    assert str(info.value) == f"--insecure-single-user: user_id: {problem}"


def test_serve_refuses_an_over_long_insecure_single_user(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    proc = run(
        tmp_path,
        "serve",
        "--port",
        str(free_port()),
        "--insecure-single-user",
        "u" * 300,
        env={"DREAMER_API_TOKENS": ""},
    )
    assert_one_error_line(proc)
    assert (proc.returncode, proc.stderr.strip()) == (
        1,
        "error: --insecure-single-user: user_id: String should have at most 255 characters",
    )


def test_a_token_whose_user_id_the_store_cannot_keep_is_a_config_error():
    raw = json.dumps([{"token": "long-enough-token-123", "user_id": "ada\x00", "role": "writer"}])
    with pytest.raises(ConfigError) as info:
        parse_tokens(raw)
    assert str(info.value) == f"api_tokens entry 0: user_id: {UNSTORABLE}"


DEEP = {
    "type": "int_type",
    "loc": ["body", "k"],
    "msg": "Input should be a valid integer",
    "input": "nested too deeply, not shown",
}


@pytest.mark.parametrize(
    ("depth", "status", "detail"),
    [
        (600, 422, [DEEP]),  # read, then too deep to echo
        (5000, 400, "There was an error parsing the body"),  # too deep to read
        (100_000, 400, "There was an error parsing the body"),
    ],
)
def test_a_body_nested_too_deeply_is_a_4xx(world, depth, status, detail):
    before = stored(world.rt)
    r = post_raw(world, "/v1/recall", b'{"query": "tea", "k": ' + b"[" * depth + b"]" * depth + b"}")
    assert (r.status_code, r.json()) == (status, {"detail": detail})
    assert stored(world.rt) == before


# --------------------------------------------------------------------------- raw bytes: UTF-8 ids, two headers, tokens


@pytest.mark.parametrize(
    ("method", "path", "field"),
    [
        ("POST", "/v1/sessions/%FE%FF/messages", "session_id"),
        ("POST", "/v1/sessions/%FF%FE/messages", "session_id"),
        ("POST", "/v1/sessions/ok%C3/flush", "session_id"),
        ("DELETE", "/v1/memories/%ED%A0%80", "memory_id"),  # an encoded surrogate is not UTF-8 either
        ("DELETE", "/v1/memories/m1?reason=%FF", "reason"),
        ("GET", "/v1/context?budget=5&%FE=1", "a query parameter name"),
    ],
)
def test_an_id_that_is_not_valid_utf8_is_422_naming_the_field_never_replaced(world, method, path, field):
    before = stored(world.rt)
    r = world.client.request(method, path, json={"messages": chat("hi")}, headers=bearer(ALICE_WRITER))
    assert (r.status_code, r.json()) == (422, {"detail": f"{field} is not valid UTF-8"})
    assert stored(world.rt) == before


def test_a_replacement_character_sent_as_utf8_is_an_ordinary_id(world):
    r = world.client.post(
        "/v1/sessions/%EF%BF%BD/messages", json={"messages": chat("hi")}, headers=bearer(ALICE_WRITER)
    )
    assert (r.status_code, r.json()["session_id"]) == (200, "\ufffd")


def test_two_authorization_headers_are_400_with_one_line(world):
    from dreamer.online.request_checks import TWO_AUTHORIZATIONS

    before = stored(world.rt)
    two = [("Authorization", f"Bearer {ALICE_WRITER}"), ("Authorization", "Bearer bob-writer-token-0123456789abc")]
    for method, path in [("POST", "/v1/sessions/twice/messages"), ("GET", "/v1/status"), ("GET", "/v1/context")]:
        r = world.client.request(method, path, json={"messages": chat("hi")}, headers=two)
        assert (r.status_code, r.json()) == (400, {"detail": TWO_AUTHORIZATIONS})
    assert TWO_AUTHORIZATIONS == "more than one Authorization header: send exactly one"
    assert stored(world.rt) == before


@pytest.mark.parametrize(
    ("token", "problem"),
    [
        (" padded-token-0123456789", "has whitespace before or after it"),
        ("padded-token-0123456789\t", "has whitespace before or after it"),
        (" " * 20, "is only whitespace"),
        ("tökén-with-accents-0123", "has characters outside ASCII"),
        ("token-with-\x07-bell-0123", "has control characters"),
    ],
    ids=["leading-space", "trailing-tab", "all-spaces", "non-ascii", "control"],
)
def test_a_token_no_request_could_send_is_a_config_error(token, problem):
    raw = json.dumps([{"token": token, "user_id": "ada", "role": "writer"}])
    with pytest.raises(ConfigError) as info:
        parse_tokens(raw)
    assert str(info.value) == f"api_tokens entry 0: token: Value error, {problem}"


def test_serve_refuses_a_padded_token_with_one_line(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    tokens = json.dumps([{"token": "padded-token-0123456789 ", "user_id": "ada", "role": "writer"}])
    proc = run(tmp_path, "serve", "--port", str(free_port()), env={"DREAMER_API_TOKENS": tokens})
    assert_one_error_line(proc)
    assert (proc.returncode, proc.stderr.strip()) == (
        1,
        "error: api_tokens entry 0: token: Value error, has whitespace before or after it",
    )
