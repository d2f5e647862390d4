"""The steering corpus through the real write paths, with real parts (the HTTP API served live,
the MCP server over streamable HTTP, a dream pass, a daily-note flush, the SessionStart hook)
and a model that believes every line it reads: no steering line is stored trusted or reaches a
context block, a SessionStart answer, MCP `get_context` or a recall hit; the flush flags exactly what
the dream path flags; benign look-alikes stay."""

from __future__ import annotations

import json
import re

import anyio
import httpx
import httpx2
import pytest
from dreamkit import is_judgement, judge_reply, make_index
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from onlinekit import ALICE_WRITER, BOB_WRITER, LiveServer, bearer, chat, online_runtime, online_settings
from sqlmodel import select
from test_steering import corpus

from dreamer.core.models import Memory, Session
from dreamer.core.scope import Scope
from dreamer.core.trust.memory_text import as_data, stored_text
from dreamer.core.trust.steering import steering_markers
from dreamer.engine.dream import dream_pass
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.claude_hooks import HookInput, run_hook
from dreamer.online.flush.notes import flush_session
from dreamer.store.db import session_scope

ROWS = corpus()
STEERING = [r["text"] for r in ROWS if r["steering"]]
BENIGN = [r["text"] for r in ROWS if not r["steering"]]
SAMPLE = STEERING[::3]  # one in three, every shape
TURN = re.compile(r"^\[(\d+)\] (?:user|assistant): (.*)$")
PER_SESSION = 8


def believing_model(body: dict) -> Reply:
    """A model that keeps every line it reads, as said (the assistant's too): as a preference,
    or as a daily note."""
    if is_judgement(body):
        return judge_reply(body, "compatible")
    found = []
    for raw in body["messages"][-1]["content"].splitlines():
        if (m := TURN.match(raw.strip())) and len(m.group(2)) >= 3:
            found.append({"text": m.group(2)[:590], "seqs": [int(m.group(1))], "importance": 0.9})
    if "daily_notes" in json.dumps(body.get("response_format") or {}):
        return Reply.json({"notes": found})
    return Reply.json({"preference": found})


@pytest.fixture
def served(settings, sqlite_engine, tmp_path):
    st = online_settings(
        settings, min_rounds=1, sessions_per_call=1, entries_per_session=40, flush_max_notes=40, context_budget=50_000
    )
    with ScriptedServer(embed_dim=64) as scripted:
        scripted.set_script(believing_model)
        rt = online_runtime(st, sqlite_engine, scripted, make_index("edge", tmp_path))
        try:
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as client:
                yield rt, live, client
        finally:
            rt.close()


def over_mcp(url: str, calls: list[tuple[str, dict]]) -> list:
    """The results of `calls` (tool, arguments), in order, as alice's writer over streamable HTTP."""

    async def call() -> list:
        async with httpx2.AsyncClient(headers=bearer(ALICE_WRITER), timeout=60) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return [await session.call_tool(tool, args) for tool, args in calls]

    return anyio.run(call)


def mcp_context(url: str) -> str:
    [result] = over_mcp(url, [("get_context", {"budget": 50_000})])
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)["text"]


def served_texts(rt, live, client) -> dict[str, str]:
    """Every place a memory is served from, as text: the block of /v1/context, of MCP
    get_context and of the SessionStart hook, and the recall hits."""
    h = bearer(ALICE_WRITER)
    hook = run_hook(rt, Scope("alice"), HookInput("SessionStart")) or {}
    recalled = client.post("/v1/recall", headers=h, json={"query": " ".join(STEERING)[:2000], "k": 50}).json()
    return {
        "context": client.get("/v1/context", headers=h, params={"budget": 50_000}).json()["text"],
        "mcp": mcp_context(live.url),
        "session_start": hook.get("hookSpecificOutput", {}).get("additionalContext", ""),
        "recall": "\n".join(f"- {as_data(hit['text'])}" for hit in recalled["hits"]),
    }


def assert_nothing_steers(served: dict[str, str]) -> None:
    for where, text in served.items():
        entries = [ln[2:] for ln in text.split("\n") if ln.startswith("- ")]
        assert [e for e in entries if steering_markers(e)] == [], where
        for line in STEERING:
            assert as_data(line) not in entries, (where, line)


def test_every_steering_agent_write_is_refused_and_benign_ones_are_served(served):
    rt, live, client = served
    refused = 0
    for text in STEERING:
        r = client.post("/v1/memories", headers=bearer(ALICE_WRITER), json={"text": text})
        assert r.status_code == 422, (text, r.text)
        assert r.json()["detail"].startswith("not stored: the text tries to steer the memory system ("), text
        refused += 1
    for text in BENIGN:
        r = client.post("/v1/memories", headers=bearer(ALICE_WRITER), json={"text": text})
        assert r.status_code == 200, (text, r.text)
    for result in over_mcp(live.url, [("add_memory", {"text": t, "kind": "preference"}) for t in SAMPLE]):
        assert result.is_error and "tries to steer the memory system" in result.content[0].text, result.content
    print(
        f"\nagent writes: {refused} of {len(STEERING)} steering refused over HTTP, {len(SAMPLE)} of {len(SAMPLE)}"
        f" over MCP; {len(BENIGN)} of {len(BENIGN)} benign stored"
    )
    seen = served_texts(rt, live, client)
    assert_nothing_steers(seen)
    assert seen["context"].count("\n- ") >= len(BENIGN) // 2  # benign memories are served


def dreamt_and_flushed(rt, texts: list[str]) -> tuple[dict[str, bool], dict[str, bool]]:
    """`texts` said by alice (dreamt) and by bob (flushed), a few a session, each answered by
    the assistant: what each path stored, text -> untrusted."""
    for i in range(0, len(texts), PER_SESSION):
        said = [t for j, text in enumerate(texts[i : i + PER_SESSION]) for t in (text, f"Noted item {i + j}.")]
        record_messages(rt.engine, f"d{i}", chat(*said), user_id="alice")
        record_messages(rt.engine, f"f{i}", chat(*said), user_id="bob")
    while dream_pass(rt, force=True, user_id="alice").sessions:
        pass
    with session_scope(rt.engine) as s:
        bob_sessions = [row.id for row in s.exec(select(Session).where(Session.user_id == "bob")).all()]
    for sid in bob_sessions:
        assert flush_session(rt, sid).status == "flushed"
    with session_scope(rt.engine) as s:
        mems = s.exec(select(Memory)).all()
    for m in mems:  # each path records why, on the evidence it kept
        assert not m.untrusted or all(e.get("untrusted_reason") for e in m.evidence), (m.text, m.evidence)
    dreamt = {m.text: m.untrusted for m in mems if m.user_id == "alice"}
    flushed = {m.text: m.untrusted for m in mems if m.user_id == "bob" and m.kind == "daily_note"}
    return dreamt, flushed


def test_the_flush_flags_what_the_dream_path_flags_and_nothing_steering_is_served(served):
    rt, live, client = served
    benign = BENIGN[:16]
    dreamt, flushed = dreamt_and_flushed(rt, [t for pair in zip(SAMPLE, benign * 3) for t in pair])
    both = set(dreamt) & set(flushed)
    print(
        f"\ndream vs flush: {len(dreamt)} dreamt, {len(flushed)} flushed,"
        f" {sum(dreamt.values())} and {sum(flushed.values())} untrusted, {len(both)} stored by both"
    )
    assert {t: dreamt[t] for t in both} == {t: flushed[t] for t in both}, "one rule for both paths"
    echoed = [t for t in flushed if t.startswith("Noted item")]
    assert echoed and all(flushed[t] for t in echoed), "a note only the assistant said is not the user's"
    trusted = [t for t, untrusted in {**dreamt, **flushed}.items() if not untrusted]
    assert trusted and all(not steering_markers(t) for t in trusted)
    assert set(trusted) <= {stored_text(t) for t in benign}
    assert sum(flushed.values()) >= len(SAMPLE) // 2 and sum(dreamt.values()) >= len(SAMPLE) // 2
    assert_nothing_steers(served_texts(rt, live, client))
    bob = client.post("/v1/recall", headers=bearer(BOB_WRITER), json={"query": " ".join(SAMPLE)[:2000], "k": 50})
    hits = bob.json()["hits"]
    assert hits and all(not steering_markers(h["text"]) for h in hits)
    # an untrusted hit is only a note no line of bob's supports, and its evidence says so
    untrusted = [h for h in hits if flushed[h["text"]]]
    assert all(h["text"].startswith("Noted item") for h in untrusted)
    assert all(e["untrusted_reason"] == "not said by the user" for h in untrusted for e in h["evidence"])
