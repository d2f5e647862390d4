"""Fitting the model's window: a long session in a 2,048-token window is split into requests
that each fit with their reply budget; judge batches are split the same way; a card that cannot
fit at all is one error before any session."""

from __future__ import annotations

import math

import openai
import pytest
from clikit import assert_one_error_line, run, write_chat
from dreamkit import EMBED_DIM, extraction_bodies, extraction_script, make_runtime, transcript_lines

from dreamer.core.errors import WindowTooSmall
from dreamer.engine.consolidation.judge import JudgePair, LLMJudge, Statement
from dreamer.engine.dream import dream_pass
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.store import record_messages
from dreamer.llm.bill import prompt_tokens_of
from dreamer.llm.client import OpenAILLM
from dreamer.llm.scripted.server import Reply, ScriptedServer

WINDOW = 2_048
FILLER = "We talked it through at length, weighing the trains, the hotels and the weather for the whole week ahead."


def long_session(rounds: int) -> list[dict]:
    msgs = []
    for i in range(rounds):
        said = f"I prefer option {i} for the trip. {FILLER}" if i % 3 == 0 else f"Round {i}: {FILLER} {FILLER}"
        msgs += [{"role": "user", "content": said}, {"role": "assistant", "content": f"Noted, round {i}. {FILLER}"}]
    return msgs


def fits(body: dict, window: int) -> bool:
    return math.ceil(prompt_tokens_of(body) * 1.2) + body["max_tokens"] <= window


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=EMBED_DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


def small_runtime(settings, engine, server, tmp_path, window: int):
    st = settings.model_copy(update={"min_rounds": 1, "entries_per_session": 50, "chunk_tokens": 12_000})
    rt = make_runtime(st, engine, server, EdgeIndex(tmp_path / "edge", EMBED_DIM))
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=30)
    rt._llm = OpenAILLM(client, model="scripted", max_retries=0, context_window=window)
    return rt


def test_a_long_session_in_a_2048_token_window_is_split_into_requests_that_fit(
    settings, sqlite_engine, server, tmp_path
):
    rt = small_runtime(settings, sqlite_engine, server, tmp_path, WINDOW)
    msgs = long_session(30)
    sid = record_messages(rt.engine, "long", msgs, user_id="alice").session_id
    try:
        run = dream_pass(rt, force=True)
    finally:
        rt.close()
    bodies = extraction_bodies(server)
    assert len(bodies) > 5
    assert all(fits(b, WINDOW) for b in bodies)
    new_lines = sorted(seq for b in bodies for seq, _, context, _ in transcript_lines(b) if not context)
    assert new_lines == list(range(1, len(msgs) + 1))  # every line sent once as new, none left out
    assert (run.status, run.sessions, run.failed_sessions, run.added) == ("ok", 1, 0, 10)
    assert sid is not None


def test_a_window_that_cannot_hold_the_card_is_one_error_before_any_session(settings, sqlite_engine, server, tmp_path):
    rt = small_runtime(settings, sqlite_engine, server, tmp_path, 1_000)
    record_messages(rt.engine, "s", long_session(2), user_id="alice")
    try:
        with pytest.raises(WindowTooSmall, match=r"extraction card \(without its examples\), its schema and a reply"):
            dream_pass(rt, force=True)
    finally:
        rt.close()
    assert server.chat_requests() == []


def test_dream_says_so_in_one_line_and_exits_1(tmp_path, server):
    chat = tmp_path / "chat.jsonl"
    write_chat(chat, ("user", "I prefer tea."), ("assistant", "ok"))
    env = {"DREAMER_LLM_BASE_URL": server.url, "DREAMER_LLM_CONTEXT_WINDOW": "1000", "DREAMER_MIN_ROUNDS": "1"}
    assert run(tmp_path, "ingest", str(chat), "--user", "alice").returncode == 0
    proc = run(tmp_path, "dream", "--force", env=env)
    assert_one_error_line(proc)
    assert "DREAMER_LLM_CONTEXT_WINDOW" in proc.stderr
    assert server.chat_requests() == []


def statement(i: int, text: str) -> Statement:
    return Statement(f"m{i}", text, "preference")


def test_judge_batches_are_split_to_fit_and_keep_the_pair_order(server):
    pairs = [
        JudgePair(statement(i, f"The user prefers option {i}. {FILLER}"), statement(100 + i, f"Now option {i + 1}."))
        for i in range(40)
    ]
    server.set_script(lambda body: Reply.json({"new": list(range(40))}))
    client = openai.OpenAI(base_url=server.url, api_key="x", max_retries=0, timeout=30)
    judge = LLMJudge(OpenAILLM(client, model="scripted", max_retries=0, context_window=WINDOW))
    result = judge.judge(pairs)
    bodies = server.chat_requests()
    assert len(bodies) > 1
    assert all(fits(b, WINDOW) for b in bodies)
    assert result.verdicts == ["new"] * 40
    assert sum(b["messages"][1]["content"].count("\n-> ") for b in bodies) == 40


def test_the_daemon_refuses_to_start_on_a_window_too_small(tmp_path, server):
    env = {"DREAMER_LLM_BASE_URL": server.url, "DREAMER_LLM_CONTEXT_WINDOW": "1000"}
    proc = run(tmp_path, "run", env=env)
    assert_one_error_line(proc)
    assert "extraction card (without its examples)" in proc.stderr
    assert server.chat_requests() == []
