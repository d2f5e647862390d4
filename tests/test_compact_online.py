"""Compaction through the runtime, the HTTP API and the MCP tools: clearing that fits makes no
model call; otherwise the older span is summarised (or, with no usable summary, offloaded whole)
and the newest turns fill the budget; a pinned part over the budget is `over`; a marker restores
its body only in its own scope, secrets redacted; the API counts tokens as the eval does."""

from __future__ import annotations

import json
import re

import anyio
import httpx
import pytest
from dreamkit import EMBED_DIM
from mcp.client.session import ClientSession
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER, LiveServer, bearer, online_runtime, online_settings
from test_mcp import data, error_line, over_http

from dreamer.client import ApiError, AsyncClient, Client
from dreamer.core.compaction.plan import SUMMARY_HEAD
from dreamer.core.compaction.policy import is_marker, total_tokens
from dreamer.core.errors import NotFound
from dreamer.core.scope import Scope
from dreamer.core.tokens import counter_named
from dreamer.eval.compaction import compacted_row
from dreamer.eval.compaction_cases import Case, Fact
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.compact import compact_script
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.compaction.compact import compact_context, restore_offloaded
from dreamer.online.session_append import append

BODY = "invoice inv_{k} total 120.00 EUR status paid; " * 40  # about 500 tokens each
SECRET = "AKIAIOSFODNN7EXAMPLE"
ALICE = Scope(user_id="alice")


def task(rounds: int = 6) -> list[dict]:
    msgs = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Backfill invoices. Never drop the audit table."},
    ]
    for k in range(rounds):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "run_sql", "arguments": '{"q": "select"}'}}
        msgs.append({"role": "assistant", "content": f"step {k}", "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": BODY.format(k=k)})
    return msgs


@pytest.fixture
def world(settings, engine, tmp_path):
    st = online_settings(settings, compact_keep_rounds=2)
    with ScriptedServer(compact_script, embed_dim=EMBED_DIM) as server:
        rt = online_runtime(st, engine, server, EdgeIndex(tmp_path / "edge", EMBED_DIM))
        try:
            yield rt, server
        finally:
            rt.close()


def test_clearing_that_fits_makes_no_model_call_and_restores_exactly(world):
    rt, server = world
    msgs = task()
    found = compact_context(rt, ALICE, msgs, budget=1500)
    assert (found.path, found.model_calls, found.fits) == ("clear", 0, True)
    assert server.chat_requests() == []
    assert [o.tool_call_id for o in found.offloads] == ["c0", "c1", "c2", "c3"]
    assert found.messages[-4:] == msgs[-4:]
    first = found.offloads[0]
    assert found.messages[3]["content"] == (
        f"[tool output offloaded: {first.tokens} tokens, id {first.id}; restore_offloaded to read it]"
    )
    assert restore_offloaded(rt, ALICE, first.id)["content"] == BODY.format(k=0)
    with pytest.raises(NotFound):
        restore_offloaded(rt, Scope(user_id="bob"), first.id)


def long_task(rounds: int = 12, last: str = "Next: backfill the remaining invoices.") -> list[dict]:
    """A task whose turns do not all fit a small budget even with every tool output cleared."""
    msgs = task(rounds)
    for k in range(rounds):
        msgs[2 + 2 * k]["content"] = f"step {k}: checking batch {k} of the invoices table before the backfill"
    return [*msgs, {"role": "assistant", "content": last}]


def test_the_older_span_is_summarised_and_the_newest_turns_fill_the_budget(world):
    rt, server = world
    msgs = long_task()
    found = compact_context(rt, ALICE, msgs, budget=400)
    assert (found.path, found.model_calls, found.fits) == ("summary", 1, True)
    assert found.budget_use >= 0.85
    [request] = server.chat_requests()
    history = request["messages"][-1]["content"]
    assert "[tool output offloaded" not in history  # the summary saw the messages, not markers
    assert "[1] user: Backfill invoices." in history and "inv_9 total 120.00" in history
    first, last = found.covers["summary"]
    assert (first, found.covers["offloaded"]) == (2, [2, last])
    assert found.covers["verbatim_from"] == last + 1
    summary = found.messages[1]["content"]
    assert summary.startswith(f"{SUMMARY_HEAD} messages 2-{last}\n")
    assert "Never drop the audit table." in summary
    assert found.messages[0] == msgs[0] and found.messages[-1] == msgs[-1]
    [span] = [o for o in found.offloads if o.role == "turns"]
    assert f"id {span.id};" in summary
    assert json.loads(restore_offloaded(rt, ALICE, span.id)["content"]) == msgs[1:last]


@pytest.mark.parametrize(
    "reply",
    [
        Reply.json({"summary": "", "ids": [], "pending_steps": [], "decisions": [], "constraints": [], "dropped": ""}),
        Reply(content="this is not JSON at all"),
    ],
    ids=["empty", "invalid"],
)
def test_an_empty_or_invalid_summary_still_fits_by_offloading_whole_turns(world, reply):
    rt, server = world
    server.push(reply.times(2))  # the invalid answer gets its one repair call
    msgs = long_task()
    found = compact_context(rt, ALICE, msgs, budget=400)
    assert (found.path, found.model_calls, found.fits) == ("offload", 1, True)
    assert found.reason is not None and found.reason.endswith("the older messages are offloaded whole")
    assert found.covers["summary"] is None and found.covers["offloaded"][0] == 2
    marker = found.messages[1]["content"]
    assert marker.startswith("[messages 2-") and marker.endswith("restore_offloaded to read them]")


def test_a_pinned_part_over_the_budget_is_over_and_everything_else_offloaded(world):
    rt, server = world
    msgs = long_task(last="Done. " + BODY.format(k=99))  # the last turn alone is over the budget
    found = compact_context(rt, ALICE, msgs, budget=300)
    assert (found.path, found.fits, found.model_calls) == ("over", False, 0)
    assert found.tokens_after == found.pinned_tokens + total_tokens(found.messages[1:2]) and found.pinned_tokens == 529
    assert found.reason.startswith(
        f"the pinned part (system prompt, pinned messages, the last turn) is {found.pinned_tokens}"
    )
    assert [m["role"] for m in found.messages] == ["system", "user", "assistant"]
    [span] = found.offloads
    assert json.loads(restore_offloaded(rt, ALICE, span.id)["content"]) == msgs[1:-1]
    assert server.chat_requests() == []


def test_offloaded_secrets_are_redacted(world):
    rt, _ = world
    msgs = task()
    msgs[3]["content"] = f"aws_access_key_id = {SECRET}\n" + BODY.format(k=0)
    found = compact_context(rt, ALICE, msgs, budget=2000)
    body = restore_offloaded(rt, ALICE, found.offloads[0].id)["content"]
    assert SECRET not in body and "[REDACTED:" in body


# --------------------------------------------------------------------------- HTTP and MCP


@pytest.fixture
def live(world):
    rt, _ = world
    with LiveServer(create_app(rt)) as server:
        yield server


def test_http_compact_and_restore_in_scope(live):
    with httpx.Client(base_url=live.url, timeout=60) as c:
        r = c.post("/v1/context/compact", headers=bearer(ALICE_WRITER), json={"messages": task(), "budget": 2000})
        assert r.status_code == 200
        answer = r.json()
        assert (answer["path"], answer["model_calls"]) == ("clear", 0)
        oid = answer["offloaded"][0]["id"]
        assert is_marker(answer["messages"][3]["content"])
        got = c.get(f"/v1/context/offloaded/{oid}", headers=bearer(ALICE_READER))
        assert (got.status_code, got.json()["content"]) == (200, BODY.format(k=0))
        other = c.get(f"/v1/context/offloaded/{oid}", headers=bearer(BOB_WRITER))
        assert (other.status_code, other.json()) == (404, {"detail": f"no offloaded body {oid}"})
        bad = c.post("/v1/context/compact", headers=bearer(ALICE_WRITER), json={"messages": []})
        assert bad.status_code == 422
        assert c.post("/v1/context/compact", headers=bearer(ALICE_READER), json={"messages": task()}).status_code == 403


def test_mcp_compact_context_and_restore_offloaded(live):
    found: dict = {}

    async def alice(session: ClientSession) -> None:
        answer = data(await session.call_tool("compact_context", {"messages": task(), "budget": 2000}))
        assert answer["path"] == "clear"
        assert (answer["tokens_before"], answer["counter"]) == (total_tokens(task()), "cl100k")  # as the API counts
        found["id"] = answer["offloaded"][1]["id"]
        back = data(await session.call_tool("restore_offloaded", {"offload_id": found["id"]}))
        assert back["content"] == BODY.format(k=1)

    async def bob(session: ClientSession) -> None:
        line = error_line(await session.call_tool("restore_offloaded", {"offload_id": found["id"]}))
        assert line == f"restore_offloaded: no offloaded body {found['id']}"

    anyio.run(over_http, live.url, ALICE_WRITER, alice)
    anyio.run(over_http, live.url, BOB_WRITER, bob)


def test_compaction_answer_is_json(world):
    rt, _ = world
    found = compact_context(rt, ALICE, task(), budget=2000)
    assert json.loads(json.dumps(found.as_json()))["offloaded"][0]["tool"] == "run_sql"


def test_the_python_client_compacts_and_restores(live):
    with Client(live.url, token=ALICE_WRITER) as alice:
        answer = alice.compact(task(), budget=1500, env_state="branch main")
        assert (answer["path"], len(answer["offloaded"])) == ("clear", 4)
        assert alice.offloaded(answer["offloaded"][2]["id"])["content"] == BODY.format(k=2)
    with Client(live.url, token=BOB_WRITER) as bob:
        with pytest.raises(ApiError) as refused:
            bob.offloaded(answer["offloaded"][2]["id"])
        assert refused.value.status == 404

    async def run_async() -> dict:
        async with AsyncClient(live.url, token=ALICE_READER) as reader:
            return await reader.offloaded(answer["offloaded"][3]["id"])

    assert anyio.run(run_async)["content"] == BODY.format(k=3)


def test_a_due_flush_runs_before_the_compaction(world):
    rt, server = world
    rt.settings = rt.settings.model_copy(update={"flush_every_messages": 2})
    append(
        rt,
        ALICE,
        "task-1",
        [{"role": "user", "content": "Backfill invoices."}, {"role": "assistant", "content": "On it."}],
    )
    found = compact_context(rt, ALICE, task(), budget=1500, session_id="task-1")
    assert (found.flushed, found.path) == ("flushed", "clear")
    assert len(server.chat_requests()) == 1  # the flush's call; clearing made none
    again = compact_context(rt, ALICE, task(), budget=1500, session_id="task-1")
    assert again.flushed is None  # nothing due any more


def compact_tokens(c: httpx.Client) -> tuple[float, float]:
    text = c.get("/metrics").text
    found = dict(re.findall(r'dreamer_llm_tokens_total\{kind="(\w+)",source="compact"\} ([0-9.e+]+)', text))
    return float(found["prompt"]), float(found["completion"])


def test_a_summary_call_is_billed_in_the_metrics(live):
    with httpx.Client(base_url=live.url, timeout=60) as c:
        before = compact_tokens(c)
        r = c.post("/v1/context/compact", headers=bearer(ALICE_WRITER), json={"messages": long_task(), "budget": 400})
        answer = r.json()
        assert (answer["path"], answer["model_calls"]) == ("summary", 1) and answer["prompt_tokens"] > 0
        after = compact_tokens(c)
    assert (after[0] - before[0], after[1] - before[1]) == (answer["prompt_tokens"], answer["completion_tokens"])


def test_the_api_and_the_eval_count_the_same_tokens(live, settings):
    msgs = long_task()
    case = Case(name="t", messages=msgs, facts=[Fact(kind="id", must_contain=["inv_0"])], budgets=[400])
    with httpx.Client(base_url=live.url, timeout=60) as c:
        answer = c.post(
            "/v1/context/compact", headers=bearer(ALICE_WRITER), json={"messages": msgs, "budget": 400}
        ).json()
    found = compacted_row(settings, None, case, 400)
    assert (answer["tokens_before"], answer["counter"]) == (found["tokens_before"], "cl100k")
    assert answer["tokens_before"] == total_tokens(msgs, counter_named("cl100k"))
