"""Grounded, or not stored, through a whole pass: the scripted model answers with a paraphrase, a
made-up number, an invented name, a copy of the card's example, a line it was never shown and a
template sentence; only the paraphrase is stored, the rest are rejected with their reasons in the
run record, as `dreamer runs show` prints it. A text has one fate in a run: never both rejected
and added."""

from __future__ import annotations

import json

import pytest
from clikit import run, write_chat
from dreamkit import EMBED_DIM, is_judgement, judge_reply, make_index, make_runtime
from sqlmodel import col, select

from dreamer.core.models import DreamRun, Memory, MemoryEvent
from dreamer.engine.dream import dream_pass
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.runs import OVER_CAP, one_fate
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.store.db import session_scope

SAID = "I'm veggie, living up in Leeds these days."
ANSWER = {
    "profile": [
        {"text": "The user is vegetarian and lives in Leeds.", "seqs": [1], "importance": 0.9},
        {"text": "The user's favourite number is 42.", "seqs": [1], "importance": 0.8},
        {"text": "The user's sister Anna lives in Leeds.", "seqs": [1], "importance": 0.7},
        {"text": "Maria prefers aisle seats on flights.", "seqs": [1], "importance": 0.6},
        {"text": "The user likes tea.", "seqs": [99], "importance": 0.5},
        {"text": "one sentence about the user", "seqs": [1], "importance": 0.4},
    ]
}


def answering(answer: dict):
    def script(body: dict) -> Reply:
        return Reply.json(answer)

    return script


def test_a_pass_stores_the_paraphrase_and_shows_why_the_rest_were_rejected(tmp_path):
    chat = tmp_path / "chat.jsonl"
    turns = [SAID, "Nice city.", "ok 1", "reply 1", "ok 2", "reply 2", "ok 3", "reply 3"]
    write_chat(chat, *[("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(turns)])
    with ScriptedServer(embed_dim=64) as server:
        server.set_script(answering(ANSWER))
        env = {"DREAMER_LLM_BASE_URL": server.url, "DREAMER_LLM_MODEL": "scripted", "DREAMER_TRIAGE": "false"}
        assert run(tmp_path, "ingest", str(chat), "--user", "alice").returncode == 0
        dreamed = run(tmp_path, "dream", "--json", env=env)
        assert dreamed.returncode == 0, dreamed.stderr
        record = json.loads(dreamed.stdout)
        shown = run(tmp_path, "runs", "show", str(record["id"]), env=env)
    assert (record["candidates"], record["added"], record["rejected"]) == (1, 1, 5)
    assert record["rejections"] == [
        {"session_id": 1, "text": "The user likes tea.", "reason": "ungrounded: no cited message"},
        {
            "session_id": 1,
            "text": "The user's favourite number is 42.",
            "reason": "ungrounded: '42' never said in the lines it cites",
        },
        {
            "session_id": 1,
            "text": "The user's sister Anna lives in Leeds.",
            "reason": "ungrounded: 'Anna' never said in the lines it cites",
        },
        {
            "session_id": 1,
            "text": "Maria prefers aisle seats on flights.",
            "reason": "ungrounded: copies the prompt",
        },
        {
            "session_id": 1,
            "text": "one sentence about the user",
            "reason": "ungrounded: 'one', 'sentence' not in message 1",
        },
    ]
    lines = shown.stdout.splitlines()
    assert lines[1:6] == [
        "  rejected: The user likes tea. (ungrounded: no cited message)",
        "  rejected: The user's favourite number is 42. (ungrounded: '42' never said in the lines it cites)",
        "  rejected: The user's sister Anna lives in Leeds. (ungrounded: 'Anna' never said in the lines it cites)",
        "  rejected: Maria prefers aisle seats on flights. (ungrounded: copies the prompt)",
        "  rejected: one sentence about the user (ungrounded: 'one', 'sentence' not in message 1)",
    ]
    assert "The user is vegetarian and lives in Leeds. (added: no neighbour)" in shown.stdout


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=EMBED_DIM) as srv:
        yield srv


def loose_pass(settings, sqlite_engine, server, tmp_path, threshold: float) -> tuple[DreamRun, float]:
    """A pass whose one candidate keeps only some of the words said: grounded or not by how near
    its embedding lies to the message it cites (the scripted server's bag-of-words vectors)."""
    text = "The user cooks lentil dishes for dinner parties."  # two of five content words said
    server.set_script(answering({"preference": [{"text": text, "seqs": [1]}]}))
    st = settings.model_copy(update={"grounding_min_similarity": threshold, "triage": False})
    rt = make_runtime(st, sqlite_engine, server, make_index("edge", tmp_path))
    turns = [
        {"role": "user", "content": "I cook lentil stuff a lot, hot and spicy"},
        {"role": "assistant", "content": "ok"},
    ]
    rec = record_messages(rt.engine, "s1", turns, user_id="u1", source="test")
    try:
        run_row = dream_pass(rt, session_ids=[rec.session_id], force=True)
        a, b = rt.embedder.embed([text, turns[0]["content"]])
        similarity = sum(x * y for x, y in zip(a, b))
    finally:
        rt.close()
    with session_scope(sqlite_engine) as s:
        return s.get(DreamRun, run_row.id), similarity


def test_a_candidate_in_its_own_words_is_kept_when_near_enough_the_message(settings, sqlite_engine, server, tmp_path):
    run_row, similarity = loose_pass(settings, sqlite_engine, server, tmp_path, 0.2)
    assert similarity >= 0.2
    assert (run_row.added, run_row.rejections) == (1, [])


def test_a_candidate_in_its_own_words_is_rejected_when_too_far(settings, sqlite_engine, server, tmp_path):
    run_row, similarity = loose_pass(settings, sqlite_engine, server, tmp_path, 0.99)
    shown = int(similarity * 1000) / 1000
    assert (run_row.added, run_row.rejections) == (
        0,
        [
            {
                "session_id": 1,
                "text": "The user cooks lentil dishes for dinner parties.",
                "reason": f"ungrounded: 'dishes', 'dinner', 'parties' not in message 1 (similarity {shown:.3f} < 0.99)",
            }
        ],
    )


def passes_of(settings, sqlite_engine, server, tmp_path, answers, said: list[str]) -> list[DreamRun]:
    """One pass per said line, each its own session of one user, the model giving the next answer."""
    server.set_script(lambda body: judge_reply(body, "new") if is_judgement(body) else Reply.json(next(answers)))
    rt = make_runtime(
        settings.model_copy(update={"triage": False}), sqlite_engine, server, make_index("edge", tmp_path)
    )
    runs = []
    try:
        for n, text in enumerate(said):
            turns = [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
            rec = record_messages(rt.engine, f"s{n}", turns, user_id="u1", source="test")
            runs.append(dream_pass(rt, session_ids=[rec.session_id], force=True))
    finally:
        rt.close()
    return runs


def test_an_update_may_name_what_the_users_memory_already_holds(settings, sqlite_engine, server, tmp_path):
    """The second session says only "the exam": the candidate naming the Spanish exam rests on the
    memory of the first; a name neither gave is rejected."""
    answers = iter(
        [
            {"focus": [{"text": "The user's Spanish exam is on 10 December.", "seqs": [1]}]},
            {
                "focus": [
                    {"text": "The user's Spanish exam was moved to 14 January.", "seqs": [1]},
                    {"text": "The user's French exam was moved to 14 January.", "seqs": [1]},
                ]
            },
        ]
    )
    said = ["my Spanish exam is on 10 December, quiz me?", "the exam got moved to 14 January, more time to practise"]
    runs = passes_of(settings, sqlite_engine, server, tmp_path, answers, said)
    assert [(r.added, r.rejections) for r in runs] == [
        (1, []),
        (
            1,
            [
                {
                    "session_id": 2,
                    "text": "The user's French exam was moved to 14 January.",
                    "reason": "ungrounded: 'French' never said in the lines it cites",
                }
            ],
        ),
    ]


def test_a_name_the_memory_holds_is_found_in_its_possessive(settings, sqlite_engine, server, tmp_path):
    """The memory says "at Tallyhub", the update "Tallyhub's": the same name, found."""
    answers = iter(
        [
            {"profile": [{"text": "The user is the backend lead at Tallyhub.", "seqs": [1]}]},
            {"focus": [{"text": "Tallyhub's launch deadline is March 1.", "seqs": [1]}]},
        ]
    )
    said = ["I'm the backend lead at Tallyhub these days", "launch deadline is march 1, load test plan?"]
    runs = passes_of(settings, sqlite_engine, server, tmp_path, answers, said)
    assert [(r.added, r.rejections) for r in runs] == [(1, []), (1, [])]


def two_sessions(settings, sqlite_engine, server, tmp_path, said: list[str]) -> DreamRun:
    """One pass over two sessions of one user, each its own call, the model writing the same
    memory for both, citing the first line of each."""
    text = "The user lives in Leeds."
    server.set_script(
        lambda body: (
            judge_reply(body, "duplicate")
            if is_judgement(body)
            else Reply.json({"profile": [{"text": text, "seqs": [1]}]})
        )
    )
    st = settings.model_copy(update={"triage": False, "sessions_per_call": 1})
    rt = make_runtime(st, sqlite_engine, server, make_index("edge", tmp_path))
    try:
        for n, line in enumerate(said):
            turns = [{"role": "user", "content": line}, {"role": "assistant", "content": "ok"}]
            record_messages(rt.engine, f"s{n}", turns, user_id="u1", source="test")
        run_row = dream_pass(rt, force=True)
    finally:
        rt.close()
    with session_scope(sqlite_engine) as s:
        return s.get(DreamRun, run_row.id)


def added_texts(engine, run_id: int) -> list[str]:
    with session_scope(engine) as s:
        rows = s.exec(
            select(Memory.text)
            .join(MemoryEvent, col(MemoryEvent.memory_id) == col(Memory.id))
            .where(col(MemoryEvent.run_id) == run_id, col(MemoryEvent.event) == "add")
        ).all()
    return list(rows)


def test_a_text_rejected_in_a_run_is_never_also_added_by_it(settings, sqlite_engine, server, tmp_path):
    """The first session never said Leeds: the memory is rejected there, and so it stays for the
    whole run, though the second session says it."""
    run_row = two_sessions(settings, sqlite_engine, server, tmp_path, ["nice weather today", "I live in Leeds"])
    reason = "ungrounded: 'Leeds' never said in the lines it cites"
    assert (run_row.added, run_row.rejections) == (
        0,
        [
            {"session_id": 1, "text": "The user lives in Leeds.", "reason": reason},
            {"session_id": 2, "text": "The user lives in Leeds.", "reason": reason},
        ],
    )
    assert added_texts(sqlite_engine, run_row.id) == []


def test_a_text_a_run_stores_is_never_also_listed_rejected(settings, sqlite_engine, server, tmp_path):
    run_row = two_sessions(settings, sqlite_engine, server, tmp_path, ["I live in Leeds", "nice weather today"])
    assert (run_row.added, run_row.rejections) == (1, [])
    assert added_texts(sqlite_engine, run_row.id) == ["The user lives in Leeds."]


def test_each_text_has_one_fate_in_a_run():
    def cand(text: str, why: str | None = None) -> Candidate:
        return Candidate(kind="profile", text=text, seqs=[1], ungrounded=why)

    fates: dict[str, str | None] = {}
    first = one_fate(fates, [cand("Kept.")], [cand("Refused.", "ungrounded: x"), cand("Over.")])
    later = one_fate(fates, [cand("Refused."), cand("Over."), cand("New.")], [cand("Kept.", "ungrounded: y")])
    assert [[c.text for c in part] for part in first] == [["Kept."], ["Refused.", "Over."]]
    assert [[(c.text, c.ungrounded) for c in part] for part in later] == [
        [("New.", None)],
        [("Refused.", "ungrounded: x"), ("Over.", OVER_CAP)],  # refused again, for the first reason
    ]  # "Kept." is stored by the run: not listed as refused by the later session
