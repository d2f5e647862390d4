"""Team memory over the live API and MCP: the leader closes rounds, members read the four tags
and cannot write, teams never see each other's memory, a temporary team leaves nothing."""

from __future__ import annotations

import json

import anyio
import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from onlinekit import bearer
from sqlmodel import select
from teamkit import BLUE, LEADER, MEMBER, READER, ROUND_ONE, ROUND_TWO, TEMP_LEAD, team_api

from dreamer.core.models import DreamRun, Memory, MemoryEvent, Team
from dreamer.engine.markdown.views import TEAMS_DIR, safe_name, user_dir
from dreamer.online.teams import end_task
from dreamer.store.db import session_scope
from dreamer.store.teams import get_team

FOUR = {
    "decision": "We chose Postgres over DynamoDB because the reports need joins.",
    "lesson": "The import timed out until batching by 500 rows fixed it.",
    "expertise": "Ben knows the billing code best.",
    "context": "The client deadline is 14 December 2026.",
}


@pytest.fixture
def live(tmp_path):
    with team_api(tmp_path) as live:
        yield live


def post(live, path: str, token: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live.url}{path}", json=body, headers=bearer(token), timeout=60)


def test_the_leader_closes_two_rounds_and_members_read_the_four_tags(live):
    first = post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_ONE})
    second = post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_TWO})
    assert first.status_code == second.status_code == 200, first.text
    assert [(r.json()["round"], r.json()["added"], r.json()["written"]) for r in (first, second)] == [
        (1, 2, True),
        (2, 2, True),
    ]
    for token in (MEMBER, READER, LEADER):
        hits = post(live, "/v1/team/recall", token, {"query": "what did the team learn", "k": 10}).json()["hits"]
        assert {h["kind"]: h["text"] for h in hits} == FOUR
    with session_scope(live.rt.engine) as s:
        rows = s.exec(select(Memory).where(Memory.team == "red")).all()
        runs = s.exec(select(DreamRun).where(DreamRun.trigger == "team-round")).all()
        events = s.exec(select(MemoryEvent)).all()
    assert {(m.agent_id, m.project, m.source) for m in rows} == {(None, None, "team")}
    assert sorted(r.added for r in runs) == [2, 2] and {r.status for r in runs} == {"ok"}
    assert sorted(e.event for e in events) == ["add"] * 4  # history, as for personal memory
    view = user_dir(live.rt.settings.workspace_dir, "alice") / TEAMS_DIR / f"{safe_name('red')}.md"
    text = view.read_text()
    for heading, line in zip(("Decisions", "Lessons", "Expertise", "Context"), FOUR.values()):
        assert f"## {heading}" in text and line in text
    assert text.index("## Decisions") < text.index("## Lessons") < text.index("## Expertise") < text.index("## Context")
    team = httpx.get(f"{live.url}/v1/team", headers=bearer(MEMBER), timeout=30).json()
    assert team == {"name": "red", "leader": "lead", "temporary": False, "rounds": 2, "you_lead": False}


def test_a_round_closed_again_merges_instead_of_adding(live):
    assert post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_ONE}).json()["added"] == 2
    again = post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_ONE}).json()
    assert (again["round"], again["added"], again["merged"]) == (2, 0, 2)


def test_a_members_write_is_refused_and_nothing_is_written(live):
    for token, why in ((MEMBER, "only the leader (lead) writes"), (READER, "only the leader (lead) writes")):
        refused = post(live, "/v1/team/rounds", token, {"messages": ROUND_ONE})
        assert refused.status_code == 403 and why in refused.json()["detail"]
    bad = post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_ONE, "session_ids": ["s1"]})
    assert bad.status_code == 422
    assert not live.scripted.chat_requests()
    with session_scope(live.rt.engine) as s:
        assert s.exec(select(Memory)).all() == []
        assert s.exec(select(Team).where(Team.name == "red")).one().rounds == 0


def test_two_teams_never_see_each_other(live):
    assert post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_ONE}).status_code == 200
    assert post(live, "/v1/team/rounds", BLUE, {"messages": ROUND_TWO}).status_code == 200
    red = post(live, "/v1/team/recall", MEMBER, {"query": "billing deadline Postgres import", "k": 10}).json()
    blue = post(live, "/v1/team/recall", BLUE, {"query": "billing deadline Postgres import", "k": 10}).json()
    assert {h["kind"] for h in red["hits"]} == {"decision", "lesson"}
    assert {h["kind"] for h in blue["hits"]} == {"expertise", "context"}


def test_team_recall_returns_only_the_kinds_asked_for(live):
    for body in ({"messages": ROUND_ONE}, {"messages": ROUND_TWO}):
        assert post(live, "/v1/team/rounds", LEADER, body).status_code == 200
    query = {"query": "what did the team learn", "k": 10}
    only = post(live, "/v1/team/recall", MEMBER, {**query, "kinds": ["decision"]}).json()["hits"]
    assert [(h["kind"], h["text"]) for h in only] == [("decision", FOUR["decision"])]
    two = post(live, "/v1/team/recall", READER, {**query, "kinds": ["lesson", "context"]}).json()["hits"]
    assert {h["kind"]: h["text"] for h in two} == {"lesson": FOUR["lesson"], "context": FOUR["context"]}
    unknown = post(live, "/v1/team/recall", MEMBER, {**query, "kinds": ["gossip"]})
    assert unknown.status_code == 422 and "kinds" in unknown.text

    async def check() -> None:
        async with httpx2.AsyncClient(headers=bearer(MEMBER), timeout=60) as http:
            async with streamable_http_client(f"{live.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    found = await session.call_tool("search_team_memory", {**query, "kinds": ["expertise"]})
                    hits = json.loads(found.content[0].text)["hits"]
                    assert [(h["kind"], h["text"]) for h in hits] == [("expertise", FOUR["expertise"])]
                    bad = await session.call_tool("search_team_memory", {**query, "kinds": ["gossip"]})
                    assert bad.is_error and bad.content[0].text.startswith("search_team_memory: invalid arguments")

    anyio.run(check)


def test_a_temporary_team_leaves_no_row_point_or_file(live):
    closed = post(live, "/v1/team/rounds", TEMP_LEAD, {"messages": ROUND_ONE + ROUND_TWO})
    assert closed.status_code == 200
    assert (closed.json()["written"], closed.json()["note"]) == (False, "temporary team: a round writes nothing")
    assert not live.scripted.chat_requests()  # not even the model is asked
    workspace = live.rt.settings.workspace_dir
    before = sorted(p.relative_to(workspace) for p in workspace.rglob("*")) if workspace.exists() else []
    assert end_task(live.rt, get_team(live.rt.engine, "alice", "scratch")) == 0
    with session_scope(live.rt.engine) as s:
        assert s.exec(select(Team).where(Team.name == "scratch")).all() == []
        assert s.exec(select(Memory).where(Memory.team == "scratch")).all() == []
        assert s.exec(select(DreamRun)).all() == []
    assert {p["team"] for p in live.rt.index.payloads(["team"]).values()} <= {"red", "blue"}
    after = sorted(p.relative_to(workspace) for p in workspace.rglob("*")) if workspace.exists() else []
    assert after == before and not any("scratch" in str(p) for p in after)


def test_the_mcp_tools_read_for_members_and_refuse_their_writes(live):
    async def check(token: str, expect_refusal: bool) -> None:
        async with httpx2.AsyncClient(headers=bearer(token), timeout=60) as http:
            async with streamable_http_client(f"{live.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    closed = await session.call_tool("close_team_round", {"messages": ROUND_ONE})
                    assert closed.is_error == expect_refusal
                    if expect_refusal:
                        [block] = closed.content
                        assert block.text == (
                            "close_team_round: only the leader (lead) writes the memory of team 'red'; members read it"
                        )
                        return
                    found = await session.call_tool("search_team_memory", {"query": "Postgres", "k": 5})
                    kinds = {h["kind"] for h in json.loads(found.content[0].text)["hits"]}
                    assert kinds == {"decision", "lesson"}

    anyio.run(check, MEMBER, True)
    anyio.run(check, LEADER, False)


def test_a_round_closed_by_its_session_ids_rests_on_their_messages(live):
    said = [{"role": "user", "content": ROUND_ONE[0]["text"]}, {"role": "assistant", "content": "Noted."}]
    appended = httpx.post(
        f"{live.url}/v1/sessions/r1/messages", json={"messages": said}, headers=bearer(MEMBER), timeout=60
    )
    assert appended.status_code == 200, appended.text
    closed = post(live, "/v1/team/rounds", LEADER, {"session_ids": ["r1"]})
    assert (closed.status_code, closed.json()["added"]) == (200, 1)
    with session_scope(live.rt.engine) as s:
        [m] = s.exec(select(Memory).where(Memory.source == "team")).all()
    assert (m.kind, m.text) == ("decision", ROUND_ONE[0]["text"])
    assert [(e["external_id"], e["seqs"], e["round"]) for e in m.evidence] == [("r1", [1], 1)]
    other = post(live, "/v1/team/rounds", BLUE, {"session_ids": ["r1"]})  # red's session is not blue's
    assert (other.status_code, other.json()["detail"]) == (404, "team 'blue' has no session 'r1'")


def test_an_item_the_round_never_said_is_rejected_not_stored(live):
    from dreamer.llm.scripted.reply import Reply
    from dreamer.llm.scripted.team import is_team_request, team_answer

    invented = "We deploy the billing service on Kubernetes in eu-west-1."

    def script(body: dict) -> Reply | None:
        if not is_team_request(body):
            return None
        answer = team_answer(body)
        answer["decision"].append({"text": invented, "seqs": [1], "importance": 0.9, "tags": []})
        return Reply.json(answer)

    live.scripted.set_script(script)
    closed = post(live, "/v1/team/rounds", LEADER, {"messages": ROUND_ONE}).json()
    assert (closed["added"], closed["rejected"]) == (2, 1)
    with session_scope(live.rt.engine) as s:
        texts = set(s.exec(select(Memory.text).where(Memory.team == "red")).all())
        [run] = s.exec(select(DreamRun).where(DreamRun.trigger == "team-round")).all()
    assert texts == {FOUR["decision"], FOUR["lesson"]}
    [rejection] = run.rejections
    assert rejection["text"] == invented and "Kubernetes" in rejection["reason"]
