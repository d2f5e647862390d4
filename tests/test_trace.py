"""`trace` follows one fact through ledger, cabinet, index, recall and context."""

from __future__ import annotations

import json

import pytest
from dreamkit import make_index, make_runtime
from onlinekit import chat
from typer.testing import CliRunner

from dreamer.core.scope import Scope
from dreamer.engine.dream import dream_pass
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.recall import context
from dreamer.online.trace import matches, trace

EUROS = "Please always give prices in euros."
SESSION_1 = chat(
    EUROS, "Will do.", "We talked about the weather in Lisbon.", "Yes.", "I prefer quiet hotels.", "ok", "thanks", "bye"
)
SESSION_2 = chat("Again: always give prices in euros.", "Sure.", "hello", "hi", "fine", "ok", "yes", "no")


@pytest.fixture
def rt(settings, engine, tmp_path):
    with ScriptedServer(embed_dim=64) as server:
        runtime = make_runtime(settings, engine, server, make_index("edge", tmp_path), llm=False)
        record_messages(runtime.engine, "trip", SESSION_1, user_id="alice")
        record_messages(runtime.engine, "dinner", SESSION_2, user_id="alice")
        record_messages(runtime.engine, "bobs", chat("Always give prices in euros.", "ok") * 4, user_id="bob")
        dream_pass(runtime)
        yield runtime
        runtime.close()


def test_matches_ignores_case_punctuation_and_partial_words():
    assert matches("prices in euros", "Please always give PRICES, in euros!")
    assert not matches("euro", "prices in euros")
    assert not matches("", "anything")


def test_a_stored_fact_passes_every_hop(rt):
    t = trace(rt, "prices in euros", "alice")

    assert t.hops == {"said": True, "remembered": True, "indexed": True, "recalled": True, "injected": True}
    assert [(s.external_id, s.seq, s.role) for s in t.said] == [("trip", 1, "user"), ("dinner", 1, "user")]
    [m] = t.memories
    assert (m.text, m.kind, m.status, m.source) == (
        "The user asks to always give prices in euros.",
        "preference",
        "verified",
        "dream",
    )
    assert [e["event"] for e in m.history] == ["add", "merge"]
    assert m.indexed_at is not None and m.in_index
    assert m.recall_rank == 1
    assert m.context_position == 1 == context(rt, Scope("alice")).memory_ids.index(m.memory_id) + 1
    data = json.loads(json.dumps(t.as_json(), default=str))
    assert data["hops"]["recalled"] and data["memories"][0]["recall_rank"] == 1


def test_a_fact_said_but_never_stored(rt):
    t = trace(rt, "the weather in Lisbon", "alice")
    assert t.hops == {"said": True, "remembered": False, "indexed": False, "recalled": False, "injected": False}
    assert [(s.external_id, s.seq) for s in t.said] == [("trip", 3)]
    assert t.memories == []


def test_a_fact_never_said(rt):
    t = trace(rt, "zebra crossings", "alice")
    assert t.hops == dict.fromkeys(("said", "remembered", "indexed", "recalled", "injected"), False)
    assert (t.said, t.memories) == ([], [])


def test_a_memory_outside_the_context_budget_is_not_injected(rt):
    t = trace(rt, "prices in euros", "alice", budget=5)
    assert t.hops["recalled"] and not t.hops["injected"]
    assert t.context_budget == 5


def test_a_forgotten_memory_is_remembered_no_more(rt):
    from dreamer.online.agent_writes import forget_memory

    [m] = trace(rt, "prices in euros", "alice").memories
    forget_memory(rt, Scope("alice"), m.memory_id, "wrong")
    t = trace(rt, "prices in euros", "alice")
    assert t.hops == {"said": True, "remembered": False, "indexed": False, "recalled": False, "injected": False}
    assert t.memories[0].status == "forgotten" and t.memories[0].history[-1]["event"] == "forget"


def test_the_cli_traces_the_demo(tmp_path, monkeypatch):
    from dreamer.cli import app, cabinet, online, records  # noqa: F401  (register commands)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DREAMER_EMBEDDER", "none")
    monkeypatch.delenv("DREAMER_LLM_BASE_URL", raising=False)
    cli = CliRunner()
    assert cli.invoke(app, ["demo"]).exit_code == 0

    recalled = cli.invoke(app, ["recall", "prices", "--user", "demo", "--json"])
    traced = cli.invoke(app, ["trace", "euros", "--user", "demo", "--json"])
    human = cli.invoke(app, ["trace", "euros", "--user", "demo"])

    hits = json.loads(recalled.stdout)
    assert hits["mode"] == "text-only"
    assert hits["hits"][0]["text"] == "The user asks to always give prices in euros."
    data = json.loads(traced.stdout)
    assert data["hops"] == {"said": True, "remembered": True, "indexed": True, "recalled": True, "injected": True}
    assert [(s["external_id"], s["seq"]) for s in data["said"]] == [
        ("agent-trip-planning", 5),
        ("agent-trip-planning", 6),
        ("agent-weekend-dinner", 7),
    ]
    assert data["memories"][0]["recall_rank"] == 1
    assert "recalled    yes rank 1" in human.stdout

    shop = ["--project", "shop-web", "--user", "demo"]
    fx = ["--depends-on", "interface:fx"]
    added = cli.invoke(app, ["experience", "add", "Prices in euros come from the fx API", *fx, "--json", *shop])
    entry = json.loads(added.stdout)["id"]
    assert cli.invoke(app, ["project", "change", "interface:fx", *shop]).exit_code == 0
    human = cli.invoke(app, ["trace", "euros", "--user", "demo"]).stdout
    assert f"  code work   entry {entry[:12]} shop-web@main [review_required] Prices in euros come" in human
    assert "        why: interface:fx changed" in human
    assert "        history: add -> candidate, demote -> review_required" in human


def test_code_work_shows_where_a_change_sent_an_entry_and_a_state(rt):
    from dreamer.engine.code_work.book import CodeBook, EntryInput, StateInput
    from dreamer.engine.code_work.changes import change
    from dreamer.store.experience import Where

    book, shop = CodeBook(rt.engine), Where("alice", "shop-web", "main")
    entry = book.add_entry(shop, EntryInput("TS2322 on columns: return a ReactNode", depends_on=["unit:LegacyTable"]))
    for unit in ("OrderList", "RefundList"):
        book.verify("alice", entry.id, unit, "passed")
    state = book.set_state(shop, StateInput("OrderList", "TS2322 fixed", True, depends_on=["unit:LegacyTable"]))
    book.add_entry(Where("bob", "shop-web", "main"), EntryInput("TS2322 on columns: bob's own"))
    change(book, shop, "unit:LegacyTable")

    t = trace(rt, "ts2322", "alice")

    assert [(w.subject, w.id, w.project, w.branch, w.status) for w in t.code_work] == [
        ("entry", entry.id, "shop-web", "main", "review_required"),
        ("state", state.id, "shop-web", "main", "review_required"),
    ]
    assert t.code_work[1].text == "OrderList.TS2322 fixed = true"
    assert [(e["event"], e["status_before"], e["status_after"]) for e in t.code_work[0].history] == [
        ("add", None, "candidate"),
        ("verify", "candidate", "candidate"),
        ("verify", "candidate", "verified"),
        ("demote", "verified", "review_required"),
    ]
    assert "unit:LegacyTable" in (t.code_work[0].reason or "")
    assert t.code_work[0].history[-1]["reason"] == t.code_work[0].reason
    assert [w.id for w in trace(rt, entry.id, "alice").code_work] == [entry.id]
    assert trace(rt, "ts2322", "alice", scope=Scope("alice", project="other")).code_work == []
    assert trace(rt, "ts2322", "alice", scope=Scope("alice", agent_id="coder")).code_work == []
    assert json.loads(json.dumps(t.as_json(), default=str))["code_work"][0]["status"] == "review_required"
