"""The MCP server through the official SDK's own clients: `dreamer mcp` as a subprocess over
stdio, and `/mcp` of a live HTTP server over streamable HTTP. Tools listed per role, a memory
added, found, injected and forgotten, a reader refused the write tools, bad arguments a one-line
tool error."""

from __future__ import annotations

import json
import os
import sys

import anyio
import httpx
import httpx2
import pytest
from clikit import run
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER, bearer, live_api

MEMORY_READS = [
    "search_memories",
    "get_context",
    "get_memory",
    "list_memories",
    "trace",
    "review_queue",
    "search_team_memory",
    "restore_offloaded",
]
CODE_READS = ["experience_search", "project_state"]
CODE_WRITES = [
    "set_project_state",
    "add_experience",
    "verify_experience",
    "experience_counterexample",
    "experience_task_end",
    "project_change",
]
READ_TOOLS = MEMORY_READS + CODE_READS
ALL_TOOLS = (
    MEMORY_READS
    + ["add_memory", "forget_memory", "record_messages", "review_memory", "close_team_round", "compact_context"]
    + CODE_READS
    + CODE_WRITES
)
FACT = "The user prefers window seats on long trains."


def data(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def error_line(result) -> str:
    assert result.is_error
    [block] = result.content
    assert "\n" not in block.text and "Traceback" not in block.text
    return block.text


async def the_memory_round_trip(session: ClientSession) -> None:
    """Add a memory, find it, see it in the context block, forget it, and find it no more."""
    added = data(await session.call_tool("add_memory", {"text": FACT, "kind": "preference"}))
    mid = added["memory_id"]
    assert (added["text"], added["kind"], added["source"]) == (FACT, "preference", "agent")

    hits = data(await session.call_tool("search_memories", {"query": "window seats trains", "k": 3}))["hits"]
    assert [h["memory_id"] for h in hits] == [mid]
    assert (hits[0]["past"], hits[0]["valid_until"], added["valid_until"]) == (False, None, None)  # no date in it

    block = data(await session.call_tool("get_context", {}))
    assert block["memory_ids"] == [mid]
    assert FACT in block["text"]

    assert data(await session.call_tool("get_memory", {"memory_id": mid}))["status"] == "candidate"
    listed = data(await session.call_tool("list_memories", {}))["memories"]
    assert [m["memory_id"] for m in listed] == [mid]

    forgotten = data(await session.call_tool("forget_memory", {"memory_id": mid, "reason": "wrong"}))
    assert forgotten["status"] == "forgotten"
    assert data(await session.call_tool("search_memories", {"query": "window seats trains"}))["hits"] == []
    assert data(await session.call_tool("get_context", {}))["text"] == ""
    assert data(await session.call_tool("list_memories", {}))["memories"] == []
    assert [m["status"] for m in data(await session.call_tool("list_memories", {"include_all": True}))["memories"]] == [
        "forgotten"
    ]


async def the_bad_arguments(session: ClientSession) -> None:
    line = error_line(await session.call_tool("search_memories", {"query": "trains", "k": 0}))
    assert line == "search_memories: invalid arguments: k: Input should be greater than or equal to 1"
    line = error_line(await session.call_tool("add_memory", {"text": FACT, "kind": "daily_note"}))
    assert line.startswith("add_memory: invalid arguments: kind: Input should be 'preference', 'profile'")
    assert error_line(await session.call_tool("get_memory", {"memory_id": "nope"})) == "get_memory: no memory nope"
    line = error_line(await session.call_tool("search_memories", {"query": "x", "since": "yesterday"}))
    assert line.startswith("search_memories: invalid arguments: since: ")


# --------------------------------------------------------------------------- stdio


def stdio_params(tmp_path, *args: str) -> StdioServerParameters:
    env = {
        "DREAMER_DATA_DIR": str(tmp_path / "data"),
        "DREAMER_EMBEDDER": "none",
        "DREAMER_LLM_BASE_URL": "",
        "DREAMER_LOCAL_USER": "alice",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    return StdioServerParameters(command=sys.executable, args=["-m", "dreamer", "mcp", *args], env=env, cwd=tmp_path)


async def over_stdio(tmp_path, *args: str, check) -> None:
    with open(tmp_path / "server.log", "w") as errlog:
        async with stdio_client(stdio_params(tmp_path, *args), errlog=errlog) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await check(session)


def test_stdio_round_trip(tmp_path):
    assert run(tmp_path, "init").returncode == 0

    async def check(session: ClientSession) -> None:
        tools = await session.list_tools()
        assert [t.name for t in tools.tools] == ALL_TOOLS
        assert all(t.description and "Returns" in t.description for t in tools.tools)
        await the_memory_round_trip(session)
        await the_bad_arguments(session)

    anyio.run(lambda: over_stdio(tmp_path, check=check))


def test_stdio_read_only(tmp_path):
    assert run(tmp_path, "init").returncode == 0

    async def check(session: ClientSession) -> None:
        assert [t.name for t in (await session.list_tools()).tools] == READ_TOOLS
        line = error_line(await session.call_tool("add_memory", {"text": FACT}))
        assert line == "add_memory: this token may only read"
        assert data(await session.call_tool("list_memories", {}))["memories"] == []

    anyio.run(lambda: over_stdio(tmp_path, "--read-only", check=check))


# --------------------------------------------------------------------------- streamable HTTP


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with live_api(tmp_path_factory.mktemp("mcp")) as server:
        yield server


async def over_http(url: str, token: str, check) -> None:
    async with httpx2.AsyncClient(headers=bearer(token), timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await check(session)


def test_http_round_trip(live):
    async def check(session: ClientSession) -> None:
        assert [t.name for t in (await session.list_tools()).tools] == ALL_TOOLS
        await the_memory_round_trip(session)
        await the_bad_arguments(session)

    anyio.run(over_http, live.url, ALICE_WRITER, check)


def test_http_reader_gets_the_read_tools_only(live):
    async def check(session: ClientSession) -> None:
        assert [t.name for t in (await session.list_tools()).tools] == READ_TOOLS
        for name, args in [
            ("add_memory", {"text": FACT}),
            ("forget_memory", {"memory_id": "x"}),
            ("record_messages", {"session_id": "s", "messages": []}),
        ]:
            assert error_line(await session.call_tool(name, args)) == f"{name}: this token may only read"

    anyio.run(over_http, live.url, ALICE_READER, check)


def test_http_record_messages_and_scope(live):
    async def alice(session: ClientSession) -> None:
        meter = data(
            await session.call_tool(
                "record_messages",
                {"session_id": "mcp-1", "messages": [{"role": "user", "content": "I like tea."}], "context_tokens": 42},
            )
        )
        assert (meter["session_id"], meter["tokens"], meter["last_seq"], meter["flush_due"]) == ("mcp-1", 42, 1, False)
        added = data(
            await session.call_tool("add_memory", {"text": "The user drinks green tea.", "session_id": "mcp-1"})
        )
        assert added["evidence"][0]["external_id"] == "mcp-1"

    async def bob(session: ClientSession) -> None:  # another user sees none of it
        assert data(await session.call_tool("search_memories", {"query": "green tea"}))["hits"] == []
        assert data(await session.call_tool("list_memories", {}))["memories"] == []
        line = error_line(await session.call_tool("add_memory", {"text": "Bob likes tea.", "session_id": "mcp-1"}))
        assert line == "add_memory: no session mcp-1"

    anyio.run(over_http, live.url, ALICE_WRITER, alice)
    anyio.run(over_http, live.url, BOB_WRITER, bob)


def test_http_without_a_known_token_is_401(live):
    answer = httpx.post(f"{live.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert (answer.status_code, answer.json()) == (401, {"detail": "missing or unknown bearer token"})
    answer = httpx.post(f"{live.url}/mcp", json={}, headers=bearer("not-a-token-of-this-server"))
    assert answer.status_code == 401
