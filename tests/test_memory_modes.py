"""Memory modes against the real mem0 OSS package, its model and embeddings a scripted
OpenAI-compatible server: external and both return the provider's results labelled; a failing
provider (down, slow past the deadline, answering 500) opens the breaker while recall answers
from the dreamer's own memory; a probe closes it once the provider is back; off reads and writes
nothing and says so. No test here reads a clock: each asserts the breaker's state and the hits."""

from __future__ import annotations

import json

import httpx
import pytest
from clikit import run
from modeskit import modes_api
from onlinekit import ALICE_WRITER, bearer
from sqlmodel import select

from dreamer.core.memory_modes import OFF_NOTE
from dreamer.core.models import Memory, Session
from dreamer.llm.scripted.server import Reply
from dreamer.store.db import session_scope

TEA = "The user prefers green tea in the morning."
LISBON = "The user is working on a talk for the Lisbon conference in May."


def post(m, path: str, body: dict) -> dict:
    r = httpx.post(f"{m.url}{path}", json=body, headers=bearer(ALICE_WRITER), timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def recall(m, query: str) -> dict:
    return post(m, "/v1/recall", {"query": query, "k": 5})


def labelled(found: dict) -> set[tuple[str, str]]:
    return {(h["source"], h["text"]) for h in found["hits"]}


def test_external_mode_returns_the_providers_results_labelled(tmp_path):
    with modes_api(tmp_path, "external") as m:
        stored = post(m, "/v1/sessions/s1/messages", {"messages": [{"role": "user", "content": LISBON}]})
        assert (stored["stored"], stored["synced"]) == (0, 1)
        m.rt.provider.drained()
        found = recall(m, "Lisbon conference")
        assert labelled(found) == {("mem0", LISBON)} and found["memory_mode"] == "external"
        assert found["hits"][0]["memory_id"].startswith("mem0:")
        with session_scope(m.rt.engine) as s:
            assert s.exec(select(Session)).all() == []  # external: the dreamer stores nothing itself
        assert m.rt.provider.state == "closed"


def test_both_mode_merges_the_two_sources_each_labelled(tmp_path):
    with modes_api(tmp_path, "both") as m:
        post(m, "/v1/memories", {"text": TEA, "kind": "preference"})  # the dreamer's, and synced
        post(m, "/v1/sessions/s1/messages", {"messages": [{"role": "user", "content": LISBON}]})
        m.rt.provider.drained()
        found = recall(m, "green tea Lisbon")
        assert labelled(found) == {("builtin", TEA), ("mem0", LISBON)}  # mem0's own copy of TEA said again: left out
        block = httpx.get(f"{m.url}/v1/context", headers=bearer(ALICE_WRITER), timeout=60).json()
        lines = block["text"].splitlines()[1:-1]
        assert lines == [f"- {TEA} [builtin]", f"- {LISBON} [mem0]"]


@pytest.mark.parametrize("failure", ["down", "slow", "500s"])
def test_a_failing_provider_opens_the_breaker_and_recall_answers_from_builtin(tmp_path, failure):
    with modes_api(tmp_path, "both", provider_deadline_ms=300) as m:
        post(m, "/v1/memories", {"text": TEA, "kind": "preference"})
        m.rt.provider.drained()
        assert labelled(recall(m, "green tea")) == {("builtin", TEA)}  # mem0's copy left out as said again
        if failure == "down":
            m.mem0.stop()
        elif failure == "slow":
            m.mem0.push_embeddings(Reply.delay(30).times(20))
        else:
            m.mem0.push_embeddings(Reply.error(500).times(200))
        for _ in range(2):  # provider_breaker_failures
            assert labelled(recall(m, "green tea")) == {("builtin", TEA)}
        assert m.rt.provider.state == "open"
        refused = recall(m, "green tea")
        assert labelled(refused) == {("builtin", TEA)} and "breaker open" in refused["note"]
        status = m.rt.provider.status()
        assert [(c["from"], c["to"]) for c in status["changes"]] == [("closed", "open")]
        # a fresh process whose shell names no memory mode reads the breaker the server opened
        store = {"DREAMER_DATABASE_URL": str(m.rt.engine.url), "DREAMER_MEMORY_MODE": "builtin"}
        (tmp_path / "shell").mkdir()
        shown = json.loads(run(tmp_path / "shell", "status", "--json", env=store).stdout)
        opened = f"open since {status['changes'][0]['at']}: {status['reason']}"
        assert (shown["memory_mode"], shown["provider"], shown["provider_breaker"]) == ("builtin", "mem0", opened)
        assert shown["provider_changes"] == 1


def test_a_probe_closes_the_breaker_when_the_provider_is_back(tmp_path):
    with modes_api(tmp_path, "both", provider_breaker_cooldown_seconds=0.0) as m:
        post(m, "/v1/sessions/s1/messages", {"messages": [{"role": "user", "content": LISBON}]})
        m.rt.provider.drained()
        m.mem0.stop()
        for _ in range(2):
            assert labelled(recall(m, "Lisbon")) == set()  # nothing of the dreamer's own matches yet
        assert m.rt.provider.state == "open"
        m.mem0.start()  # the same port: the provider is back
        found = recall(m, "Lisbon conference")  # the cool-down (0 s) is over: this call is the probe
        assert labelled(found) == {("mem0", LISBON)} and m.rt.provider.state == "closed"
        moves = [(c["from"], c["to"]) for c in m.rt.provider.status()["changes"]]
        assert moves[:1] == [("closed", "open")] and moves[-2:] == [("open", "probe"), ("probe", "closed")]


def test_off_reads_and_writes_nothing_and_says_so(tmp_path):
    with modes_api(tmp_path, "off") as m:
        wrote = post(m, "/v1/sessions/s1/messages", {"messages": [{"role": "user", "content": LISBON}]})
        kept = post(m, "/v1/memories", {"text": TEA, "kind": "preference"})
        found = recall(m, "green tea")
        block = httpx.get(f"{m.url}/v1/context", headers=bearer(ALICE_WRITER), timeout=60).json()
        assert wrote == kept == {"memory_mode": "off", "stored": 0, "synced": 0, "note": OFF_NOTE}
        assert (found["hits"], found["note"]) == ([], OFF_NOTE)
        assert (block["text"], block["note"]) == ("", OFF_NOTE)
        with session_scope(m.rt.engine) as s:
            assert s.exec(select(Session)).all() == [] and s.exec(select(Memory)).all() == []
        assert m.rt.provider is None and not (m.settings.data_dir / "mem0").exists()
        assert m.own.requests == [] and m.mem0.requests == []


def test_off_leaves_the_claude_code_hooks_reading_and_storing_nothing(tmp_path):
    from dreamer.core.scope import Scope
    from dreamer.online.claude_hooks import HookInput, run_hook

    transcript = tmp_path / "t.jsonl"
    line = {"type": "user", "sessionId": "c1", "message": {"role": "user", "content": TEA}}
    transcript.write_text(json.dumps(line) + "\n")
    with modes_api(tmp_path, "off") as m:
        for event in ("SessionStart", "UserPromptSubmit", "Stop", "PreCompact"):
            hook = HookInput(event, "c1", str(transcript), str(tmp_path), "green tea?", {})
            assert run_hook(m.rt, Scope("alice"), hook) is None
        with session_scope(m.rt.engine) as s:
            assert s.exec(select(Session)).all() == []


def test_a_failed_sync_batch_is_tried_again_in_the_background(tmp_path):
    with modes_api(tmp_path, "external", provider_sync_retries=2, provider_breaker_failures=5) as m:
        m.mem0.push_embeddings(Reply.error(500))  # the first try of the batch fails
        turns = [{"role": "user", "content": LISBON}, {"role": "user", "content": TEA}]
        assert post(m, "/v1/sessions/s1/messages", {"messages": turns})["synced"] == 2
        m.rt.provider.drained()
        status = m.rt.provider.status()
        assert (status["turns_dropped"], status["turns_waiting"], status["breaker"]) == (0, 0, "closed")
        assert labelled(recall(m, "Lisbon conference green tea")) == {("mem0", LISBON), ("mem0", TEA)}
        adds = [r for r in m.mem0.requests if r["path"].endswith("/embeddings")]
        assert len(adds) == 1 + 2 + 1  # the failed try, the retried batch's two turns, the recall
