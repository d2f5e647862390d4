"""`dreamer.client` against a live server (uvicorn on a free port of 127.0.0.1): the agent loop,
sync and async, and every error answer as the exception it is."""

from __future__ import annotations

import anyio
import pytest
from onlinekit import ALICE_READER, ALICE_WRITER, chat, free_port, live_api

from dreamer.client import ApiDenied, ApiError, ApiUnavailable, AsyncClient, Client
from dreamer.core.errors import DreamerError, Retryable

FACT = "The user prefers trains over planes."


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with live_api(tmp_path_factory.mktemp("client")) as server:
        yield server


def test_the_agent_loop(live):
    with Client(live.url, ALICE_WRITER) as memory:
        meter = memory.append("trip-42", chat("I prefer trains over planes.", "Noted."), context_tokens=90)
        assert (meter["session_id"], meter["tokens"], meter["last_seq"], meter["flush_scheduled"]) == (
            "trip-42",
            90,
            2,
            False,
        )
        stored = memory.remember(FACT, session_id="trip-42")
        assert (stored["text"], stored["kind"], stored["source"], stored["status"]) == (
            FACT,
            "preference",
            "agent",
            "candidate",
        )
        assert stored["evidence"][0]["external_id"] == "trip-42"
        found = memory.recall("trains or planes", k=2)
        assert [h["memory_id"] for h in found["hits"]] == [stored["memory_id"]]
        block = memory.context(budget=200)
        assert block["memory_ids"] == [stored["memory_id"]]
        assert f"- {FACT}" in block["text"]
        status = memory.status()
        assert (status["user_id"], status["role"], status["sessions"], status["messages"]) == ("alice", "writer", 1, 2)
        gone = memory.forget(stored["memory_id"], reason="changed their mind")
        assert gone["status"] == "forgotten"
        assert memory.recall("trains or planes")["hits"] == []
        flushed = memory.flush("trip-42")  # the rules extractor, without a model, keeps the stated preference
        assert (flushed["session_id"], flushed["status"], flushed["notes"]) == ("trip-42", "flushed", [FACT])


def test_errors_are_exceptions_of_the_tree(live):
    with Client(live.url, ALICE_READER) as reader:
        with pytest.raises(ApiDenied) as denied:
            reader.remember("The user likes tea.")
        assert (denied.value.status, str(denied.value)) == (403, "POST /v1/memories: 403 this token may only read")
        assert isinstance(denied.value, DreamerError)
    with Client(live.url, "not-a-token-of-this-server") as stranger, pytest.raises(ApiDenied) as unknown:
        stranger.context()
    assert unknown.value.status == 401
    with Client(live.url, ALICE_WRITER) as writer:
        with pytest.raises(ApiError) as missing:
            writer.forget("no-such-memory")
        assert (missing.value.status, str(missing.value)) == (
            404,
            "DELETE /v1/memories/no-such-memory: 404 no memory no-such-memory",
        )
        with pytest.raises(ApiError) as invalid:
            writer.recall("trains", k=0)
        assert invalid.value.status == 422
        assert str(invalid.value) == "POST /v1/recall: 422 k: Input should be greater than or equal to 1"


def test_an_unreachable_server_is_retryable():
    with Client(f"http://127.0.0.1:{free_port()}", ALICE_WRITER, timeout=5) as nowhere:
        with pytest.raises(ApiUnavailable) as down:
            nowhere.status()
    assert isinstance(down.value, Retryable)
    assert str(down.value).startswith("GET /v1/status: the API could not be reached (ConnectError")


def test_the_async_client(live):
    async def loop() -> tuple:
        async with AsyncClient(live.url, ALICE_WRITER) as memory:
            await memory.append("async-1", chat("hello", "hi"))
            stored = await memory.remember("The user keeps a cat named Miso.", "profile")
            hits = (await memory.recall("cat named Miso", k=1))["hits"]
            try:
                await memory.forget("no-such-memory")
            except ApiError as exc:
                status = exc.status
            return stored["memory_id"], [h["memory_id"] for h in hits], status

    mid, hits, status = anyio.run(loop)
    assert (hits, status) == ([mid], 404)
