"""Memory for code work over the HTTP API and the MCP tools (a live server, the SDK's client)."""

from __future__ import annotations

import json

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER, bearer, live_api

SHOP = {"project": "shop-web", "branch": "main"}


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    with live_api(tmp_path_factory.mktemp("code")) as server:
        yield server


def test_state_experience_and_changes_over_http(live):
    with httpx.Client(base_url=live.url, headers=bearer(ALICE_WRITER), timeout=60) as http:
        state = {**SHOP, "unit": "OrderList", "field": "migrated", "value": True, "status": "verified"}
        r = http.put("/v1/projects/state", json={**state, "depends_on": ["unit:LegacyTable"]})
        assert (r.status_code, r.json()["status"]) == (200, "in_progress")
        entry = {**SHOP, "text": "TS2322 on columns: return a ReactNode", "depends_on": ["unit:LegacyTable"]}
        eid = http.post("/v1/experience", json=entry).json()["id"]
        for unit in ("OrderList", "RefundList"):
            r = http.post(f"/v1/experience/{eid}/verify", json={"unit": unit})
        assert r.json()["status"] == "verified"
        r = http.post("/v1/projects/changes", json={**SHOP, "target": "unit:LegacyTable"})
        assert sorted(d["subject"] for d in r.json()["demoted"]) == ["entry", "state"]
        found = http.post("/v1/experience/search", json={**SHOP, "query": "TS2322 in InvoiceList"}).json()
        assert [(e["id"], e["status"], e["reliable"]) for e in found["entries"]] == [(eid, "review_required", False)]
        assert http.post("/v1/projects/changes", json={**SHOP, "target": "path:x"}).status_code == 422
        assert http.post("/v1/experience/nope/verify", json={"unit": "A"}).status_code == 404
    with httpx.Client(base_url=live.url, headers=bearer(BOB_WRITER), timeout=60) as http:
        assert http.get("/v1/projects/shop-web/state").json()["states"] == []
        assert http.post(f"/v1/experience/{eid}/confirm", json={"by": "bob"}).status_code == 404
    with httpx.Client(base_url=live.url, headers=bearer(ALICE_READER), timeout=60) as http:
        states = http.get("/v1/projects/shop-web/state").json()["states"]
        assert [(s["unit"], s["status"]) for s in states] == [("OrderList", "review_required")]
        assert http.post("/v1/experience", json=entry).status_code == 403


async def over_http(url: str, token: str, check) -> None:
    async with httpx2.AsyncClient(headers=bearer(token), timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await check(session)


def data(result) -> dict:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_task_end_then_task_start_over_mcp(live):
    async def check(session: ClientSession) -> None:
        ended = data(
            await session.call_tool(
                "experience_task_end",
                {
                    "project": "mcp-web",
                    "task": "T1",
                    "unit": "InvoiceList",
                    "failed_calls": [
                        {"tool": "bash", "command": "pnpm tsc", "error": "TS7016: no types for table-lib"}
                    ],
                },
            )
        )
        [entry] = ended["entries"]
        assert (entry["status"], entry["basis"], entry["origin"]) == ("candidate", "observed", "tool")
        found = data(await session.call_tool("experience_search", {"project": "mcp-web", "query": "TS7016 table-lib"}))
        assert [e["id"] for e in found["entries"]] == [entry["id"]]
        assert found["checklist"][0]["label"] == "candidate from one task: a suggestion of what to check, not verified"
        bad = await session.call_tool("project_change", {"project": "mcp-web", "target": "nothing"})
        assert bad.is_error
        assert bad.content[0].text.startswith("project_change: target 'nothing': use file:PATH")
        traced = data(await session.call_tool("trace", {"fact": "TS7016"}))
        assert [(w["subject"], w["id"], w["status"]) for w in traced["code_work"]] == [
            ("entry", entry["id"], "candidate")
        ]

    anyio.run(over_http, live.url, ALICE_WRITER, check)
