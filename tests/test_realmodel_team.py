"""The team card on a real model (the `realmodel` lane: SmolLM2-135M-Instruct served by
llama_cpp.server, behind the recording proxy), as a leader closes a round from the CLI. A 135M
model is held to no quality figure: its answer is read, every item stored rests on a line of the
round and carries a tag, every item left out has its reason, and the run bills what the server said."""

from __future__ import annotations

import json

import pytest
from clikit import run
from sqlmodel import select
from teamkit import ROUND_ONE, ROUND_TWO
from usagekit import UsageProxy

from dreamer.core.models import Memory
from dreamer.store import db
from dreamer.store.db import session_scope

pytestmark = pytest.mark.realmodel

ROUND = [*ROUND_ONE, *ROUND_TWO]  # a decision, a lesson, small talk, expertise and a deadline


@pytest.fixture
def proxy(smollm2):
    with UsageProxy(smollm2.base_url) as p:
        yield p


def test_a_round_closed_on_a_real_model_stores_only_tagged_grounded_items(tmp_path, smollm2, proxy):
    env = {"DREAMER_LLM_BASE_URL": proxy.url, "DREAMER_LLM_MODEL": smollm2.model, "DREAMER_EMBEDDER": "none"}
    assert run(tmp_path, "init", env=env).returncode == 0
    assert run(tmp_path, "team", "create", "red", "--user", "alice", "--leader", "lead", env=env).returncode == 0
    messages = tmp_path / "round.jsonl"
    messages.write_text("".join(json.dumps(m) + "\n" for m in ROUND))
    closed = run(tmp_path, "team", "close-round", "red", "--user", "alice", "--messages", str(messages), env=env)
    assert closed.returncode == 0, closed.stderr
    assert closed.stdout.startswith("team red round 1 closed (run ")
    record = json.loads(run(tmp_path, "runs", "show", "1", "--json", env=env).stdout)
    assert (record["status"], record["trigger"]) == ("ok", "team-round")
    assert (record["prompt_tokens"], record["completion_tokens"]) == proxy.total()
    assert all(r["reason"] for r in record["rejections"])
    shown = json.loads(run(tmp_path, "team", "show", "red", "--user", "alice", "--json", env=env).stdout)
    assert all(m["kind"] in ("decision", "lesson", "expertise", "context") for m in shown["memories"]), shown
    engine = db.make_engine(f"sqlite:///{tmp_path / 'data' / 'dreamer.db'}")
    with session_scope(engine) as s:
        rows = s.exec(select(Memory).where(Memory.team == "red")).all()
        evidence = {m.id: m.evidence for m in rows}
    engine.dispose()
    assert set(evidence) == {m["memory_id"] for m in shown["memories"]}
    for ev in evidence.values():  # each rests on lines of the round
        assert ev and all(e["seqs"] and set(e["seqs"]) <= set(range(1, len(ROUND) + 1)) for e in ev), ev
