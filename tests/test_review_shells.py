"""The review queue through its shells: `dreamer review` as a subprocess, `/v1/review` and the MCP
review tools of a live server (scope: a user sees and decides only their own queue)."""

from __future__ import annotations

import json

import anyio
import httpx
import httpx2
import pytest
from clikit import assert_one_error_line, run, write_chat
from dreamkit import EMBED_DIM
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER, LiveServer, bearer, online_runtime, online_settings

from dreamer.core.settings import Settings
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import cabinet, db
from dreamer.store.db import session_scope


def test_review_commands(tmp_path):
    env = {"DREAMER_REVIEW_MODE": "1"}
    for name, line in (("a", "I prefer tea."), ("b", "My name is Ada.")):
        write_chat(tmp_path / f"{name}.jsonl", *[("user", line), ("assistant", "ok")] * 4)
        run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "ada", env=env)
    assert run(tmp_path, "dream", env=env).returncode == 0
    assert json.loads(run(tmp_path, "memories", "ls", "--json").stdout) == []  # nothing current yet
    items = json.loads(run(tmp_path, "review", "ls", "--json").stdout)
    assert sorted((i["text"], i["status"]) for i in items) == [
        ("The user prefers tea.", "pending"),
        ("The user's name is Ada.", "pending"),
    ]
    tea = next(i["memory_id"] for i in items if "tea" in i["text"])
    name = next(i["memory_id"] for i in items if "Ada" in i["text"])
    edited = run(tmp_path, "review", "edit", tea[:8], "--text", "The user prefers green tea.")
    assert (edited.returncode, edited.stdout) == (0, f"accepted {tea}: now verified\n")
    rejected = run(tmp_path, "review", "reject", name, "--json")
    assert json.loads(rejected.stdout) == {
        "memory_id": name,
        "user_id": "ada",
        "status": "rejected",
        "replaced": [],
        "kept": [],
    }
    assert [m["text"] for m in json.loads(run(tmp_path, "memories", "ls", "--json").stdout)] == [
        "The user prefers green tea."
    ]
    assert run(tmp_path, "review", "ls").stdout == "nothing waits for review\n"
    again = run(tmp_path, "review", "accept", name)
    assert_one_error_line(again)
    assert again.stderr == f"error: memory {name} is rejected, not waiting for review\n"


@pytest.fixture
def live(tmp_path):
    settings = online_settings(Settings(_env_file=None, data_dir=tmp_path / "data"))
    engine = db.make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    db.upgrade(engine)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(settings, engine, scripted, EdgeIndex(tmp_path / "edge", EMBED_DIM), llm=False)
        ids = []
        with session_scope(engine) as s:
            for text in ("The user prefers tea.", "The user lives in Porto."):
                m = cabinet.add_memory(s, user_id="alice", kind="profile", text=text, source="dream", evidence=[])
                m.status = "pending"
                ids.append(m.id)
        try:
            with LiveServer(create_app(rt)) as server:
                yield server, ids
        finally:
            rt.close()
            engine.dispose()


def test_review_routes_and_tools(live):
    server, (tea, porto) = live
    url = f"{server.url}/v1/review"
    queue = httpx.get(url, headers=bearer(ALICE_READER)).json()["items"]
    assert [(i["memory_id"], i["status"]) for i in queue] == [(tea, "pending"), (porto, "pending")]
    assert httpx.get(url, headers=bearer(BOB_WRITER)).json() == {"items": []}
    accept = {"decision": "accept"}
    assert httpx.post(f"{url}/{tea}", json=accept, headers=bearer(BOB_WRITER)).status_code == 404
    assert httpx.post(f"{url}/{tea}", json=accept, headers=bearer(ALICE_READER)).status_code == 403
    assert httpx.post(f"{url}/{tea}", json={"decision": "maybe"}, headers=bearer(ALICE_WRITER)).status_code == 422
    done = httpx.post(f"{url}/{tea}", json=accept, headers=bearer(ALICE_WRITER))
    assert (done.status_code, done.json()["status"]) == (200, "candidate")
    again = httpx.post(f"{url}/{tea}", json=accept, headers=bearer(ALICE_WRITER))
    assert (again.status_code, again.json()) == (409, {"detail": f"memory {tea} is candidate, not waiting for review"})

    async def check(session: ClientSession) -> None:
        [item] = json.loads((await session.call_tool("review_queue", {})).content[0].text)["items"]
        assert item["memory_id"] == porto
        result = await session.call_tool("review_memory", {"memory_id": porto, "decision": "reject"})
        assert json.loads(result.content[0].text)["status"] == "rejected"

    async def over_http() -> None:
        async with httpx2.AsyncClient(headers=bearer(ALICE_WRITER), timeout=60) as http:
            async with streamable_http_client(f"{server.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await check(session)

    anyio.run(over_http)
    assert httpx.get(url, headers=bearer(ALICE_WRITER)).json() == {"items": []}
    hits = httpx.post(f"{server.url}/v1/recall", json={"query": "tea Porto"}, headers=bearer(ALICE_WRITER)).json()
    assert [h["memory_id"] for h in hits["hits"]] == [tea]
