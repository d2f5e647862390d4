"""The LoCoMo harness: scoring as pure functions with exact values on a tiny hand-made file, the
observation replay, and one end-to-end run per memory mode through the real pipeline."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import dreamer.cli.measure  # noqa: F401  (registers eval and bench)
from dreamer.cli import app
from dreamer.core.errors import NotFound
from dreamer.core.settings import Settings
from dreamer.core.tokens import count_tokens
from dreamer.embed.embedders import minilm_available
from dreamer.eval.harness import EvalOptions, eval_settings, run_locomo
from dreamer.eval.locomo import (
    DiaMap,
    Observation,
    Question,
    Scored,
    aggregate,
    ceiling,
    hit_at_k,
    load_conversations,
    questions_of,
    recall_at_k,
    score_question,
)
from dreamer.eval.locomo_replay import ObservationReplay, kind_of, replay_answer

RESULT_KEYS = {
    "n_questions",
    "recall_at",
    "hit_at",
    "by_category",
    "evidence_ceiling",
    "memories",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "dialogue_tokens",
    "tokens_per_dialogue_token",
    "seconds",
}
TURNS = {
    "D1:1": ("Ann", "I started learning the cello last month."),
    "D1:2": ("Bob", "Nice! I bake sourdough bread every Sunday morning."),
    "D1:3": ("Ann", "My sister Clara lives in Lisbon."),
    "D1:4": ("Bob", "Lisbon is lovely in spring."),
    "D2:1": ("Ann", "I adopted a grey cat called Pixel."),
    "D2:2": ("Bob", "I am training for the Berlin marathon."),
    "D2:3": ("Ann", "Good luck with the marathon!"),
    "D2:4": ("Bob", "Thanks, my knee hurts a little."),
}


def conversation() -> dict:
    def session(n: int) -> list[dict]:
        return [
            {"speaker": who, "dia_id": d, "text": text} for d, (who, text) in TURNS.items() if d.startswith(f"D{n}:")
        ]

    return {
        "sample_id": "tiny-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": session(1),
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": session(2),
            "session_3_date_time": "9:00 am on 1 June, 2023",  # a date without turns, as in the data
        },
        "observation": {
            "session_1_observation": {
                "Ann": [
                    ["Ann is learning to play the cello.", "D1:1"],
                    ["Ann's sister Clara lives in Lisbon.", "D1:3"],
                ],
                "Bob": [["Bob bakes sourdough bread every Sunday.", ["D1:2", "D9:9"]]],
            },
            "session_2_observation": {
                "Ann": [["Ann adopted a grey cat named Pixel.", "D2:1"]],
                "Bob": [["Bob is training for the Berlin marathon.", "D2:2"], ["Bob had a cold.", "D7"]],
            },
        },
        "qa": [
            {"question": "What instrument is Ann learning?", "answer": "cello", "evidence": ["D1:1"], "category": 4},
            {
                "question": "Where does Ann's sister live?",
                "answer": "Lisbon",
                "evidence": ["D1:3", "D1:4"],
                "category": 1,
            },
            {"question": "What did Bob train for?", "answer": "marathon", "evidence": ["D2:2", "D2:4"], "category": 2},
            {
                "question": "Which pet does Ann have and what does Bob bake?",
                "answer": "cat; bread",
                "evidence": ["D2:1", "D1:2; D2:1", "D1:2"],
                "category": 3,
            },
            {"question": "Is Bob hurt?", "answer": "knee", "evidence": ["D2:4"], "category": 4},
            {"question": "What does Ann hate?", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
            {"question": "Malformed only", "answer": "x", "evidence": ["D:11:26", "D"], "category": 4},
        ],
    }


@pytest.fixture
def locomo_file(tmp_path):
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps([conversation()]), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- scoring, exact


def test_recall_and_hit_at_k_exact():
    retrieved = [{"D1:1"}, {"D1:5", "D1:3"}, set(), {"D2:2"}]
    assert recall_at_k(["D1:1", "D1:3", "D2:2", "D2:4"], retrieved, 1) == 0.25
    assert recall_at_k(["D1:1", "D1:3", "D2:2", "D2:4"], retrieved, 2) == 0.5
    assert recall_at_k(["D1:1", "D1:3", "D2:2", "D2:4"], retrieved, 10) == 0.75
    assert recall_at_k(["D2:4"], retrieved, 10) == 0.0
    assert recall_at_k(["D1:3"], retrieved, 0) == 0.0
    assert hit_at_k(["D1:3", "D2:4"], retrieved, 1) == 0.0
    assert hit_at_k(["D1:3", "D2:4"], retrieved, 2) == 1.0
    with pytest.raises(ValueError):
        recall_at_k([], retrieved, 5)


def test_ceiling_exact():
    assert ceiling(["D1:1", "D1:2", "D1:3"], {"D1:1", "D1:3", "D9:9"}) == pytest.approx(2 / 3)
    assert ceiling(["D1:1"], set()) == 0.0


def test_aggregate_exact_means_and_categories():
    rows = [
        Scored(1, {5: 0.5, 10: 1.0}, {5: 1.0, 10: 1.0}, 1.0),
        Scored(1, {5: 0.0, 10: 0.5}, {5: 0.0, 10: 1.0}, 0.5),
        Scored(4, {5: 1.0, 10: 1.0}, {5: 1.0, 10: 1.0}, 1.0),
    ]
    out = aggregate(rows, [5, 10])
    assert out["n_questions"] == 3
    assert out["recall_at"] == {"5": 0.5, "10": round(2.5 / 3, 4)}
    assert out["hit_at"] == {"5": round(2 / 3, 4), "10": 1.0}
    assert out["evidence_ceiling"] == round(2.5 / 3, 4)
    assert out["by_category"]["1"] == {
        "n_questions": 2,
        "recall_at": {"5": 0.25, "10": 0.75},
        "hit_at": {"5": 0.5, "10": 1.0},
        "evidence_ceiling": 0.75,
    }
    assert out["by_category"]["4"]["recall_at"] == {"5": 1.0, "10": 1.0}


def test_score_question_uses_the_gold_evidence():
    q = Question("q", 2, ("D1:1", "D1:2"))
    scored = score_question(q, [{"D1:2"}, {"D1:1"}], {"D1:1", "D1:2"}, [1, 2])
    assert scored == Scored(2, {1: 0.5, 2: 1.0}, {1: 1.0, 2: 1.0}, 1.0)


# --------------------------------------------------------------------------- reading the file


def test_questions_keep_categories_1_to_4_with_real_evidence(locomo_file):
    [conv] = load_conversations(locomo_file)
    assert [(q.category, q.evidence) for q in conv.questions] == [
        (4, ("D1:1",)),
        (1, ("D1:3", "D1:4")),
        (2, ("D2:2", "D2:4")),
        (3, ("D1:2", "D2:1")),
        (4, ("D2:4",)),
    ]
    assert questions_of([{"question": "x", "category": 5, "evidence": ["D1:1"]}], {"D1:1"}) == []


def test_observations_keep_only_real_turns(locomo_file):
    [conv] = load_conversations(locomo_file)
    bob = [o for o in conv.observations[1] if o.speaker == "Bob"]
    assert bob == [Observation(1, "Bob", "Bob bakes sourdough bread every Sunday.", ("D1:2",))]
    assert [o.dia_ids for o in conv.observations[2]] == [("D2:1",), ("D2:2",), ()]


def test_unknown_conversation_is_an_error(locomo_file):
    with pytest.raises(NotFound) as info:
        load_conversations(locomo_file, ["nope", "tiny-1"])
    assert str(info.value) == f"{locomo_file}: no conversation nope (the file holds tiny-1)"


def test_dia_map_both_ways():
    dmap = DiaMap()
    dmap.add("D1:1", "c:session_1", 1)
    dmap.add("D1:2", "c:session_1", 2)
    dmap.add("D2:1", "c:session_2", 1)
    assert dmap.seqs(["D1:2", "D1:1", "D2:1", "D9:9"], "c:session_1") == [1, 2]
    evidence = [{"external_id": "c:session_2", "seqs": [1]}, {"external_id": "c:session_1", "seqs": [2, 7]}]
    assert dmap.dia_ids(evidence) == {"D2:1", "D1:2"}


def test_kinds_of_observations():
    assert kind_of("Ann loves hiking.") == "preference"
    assert kind_of("Bob is planning a trip to Rome.") == "focus"
    assert kind_of("Ann's sister lives in Lisbon.") == "profile"


def extraction(transcript: str) -> dict:
    return {
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": transcript}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "memories"}},
    }


def test_replay_answers_each_session_of_a_packed_transcript_under_the_numbers_shown():
    dmap = DiaMap()
    for dia, external_id, seq in [("D1:1", "c:s1", 1), ("D1:2", "c:s1", 2), ("D2:1", "c:s2", 1), ("D2:2", "c:s2", 2)]:
        dmap.add(dia, external_id, seq)
    replay = ObservationReplay(
        {
            "c:s1": (
                [(1, "Hi!"), (2, "I adopted a dog\nnamed Rex.")],
                [Observation(1, "Ann", "Ann adopted a dog, Rex.", ("D1:2",))],
            ),
            "c:s2": (
                [(1, "Hi!"), (2, "Rex loves the beach.")],
                [Observation(2, "Ann", "Ann's dog Rex loves the beach.", ("D2:1", "D2:2"))],
            ),
        },
        dmap,
    )
    transcript = (
        '<transcript user="Ann">\n[1] Ann: Hi!\n[2] Ann: I adopted a dog\n    named Rex.\n'
        "[3] Ann: Hi!\n[4] Ann: Rex loves the beach.\n</transcript>"
    )
    assert replay.numbering(transcript) == {("c:s1", 1): 1, ("c:s1", 2): 2, ("c:s2", 1): 3, ("c:s2", 2): 4}
    assert json.loads(replay(extraction(transcript)).content) == {
        "profile": [{"text": "Ann adopted a dog, Rex.", "seqs": [2]}],
        "preference": [{"text": "Ann's dog Rex loves the beach.", "seqs": [3, 4]}],
    }
    # a text both sessions have, after the first session's last line, goes with the line after it
    assert replay.numbering(
        "[7] Ann: I adopted a dog\n    named Rex.\n[8] Ann: Hi!\n[9] Ann: Rex loves the beach."
    ) == {("c:s1", 2): 7, ("c:s2", 1): 8, ("c:s2", 2): 9}
    # the second session alone, numbered on from the first: only its observation, under the numbers shown
    assert json.loads(replay(extraction("[9] Ann: Hi!\n[10] Ann: Rex loves the beach.")).content) == {
        "preference": [{"text": "Ann's dog Rex loves the beach.", "seqs": [9, 10]}]
    }


def test_replay_answers_a_session_with_its_observations():
    obs = [Observation(1, "Ann", "Ann is learning the cello.", ("D1:1",)), Observation(1, "Bob", "Nothing.", ())]
    dmap = DiaMap()
    dmap.add("D1:1", "c:session_1", 3)
    answer = replay_answer(obs, lambda o: dmap.seqs(o.dia_ids, "c:session_1"))
    assert answer == {"profile": [{"text": "Ann is learning the cello.", "seqs": [3]}]}
    replay = ObservationReplay(
        {
            "c:session_1": ([(1, "hello there"), (2, "I started the cello")], obs),
            "c:session_2": ([(1, "other"), (2, "words")], []),
        },
        dmap,
    )
    assert replay.numbering("[1] Ann: hello there\n[2] Bob: I started the cello") == {
        ("c:session_1", 1): 1,
        ("c:session_1", 2): 2,
    }
    assert replay.numbering("[1] Ann: unrelated") == {}
    assert json.loads(replay(extraction("[1] Ann: unrelated")).content) == {}
    assert replay.unmatched == 1
    body = {
        "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "0. a\n-> b\n1. c\n-> d"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "judgements"}},
    }
    assert json.loads(replay(body).content) == {"new": [0, 1]}
    body.pop("response_format")  # json_object mode: told apart by its pairs
    assert json.loads(replay(body).content) == {"new": [0, 1]}


# --------------------------------------------------------------------------- end to end


def _settings(tmp_path, embedder: str) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "unused", embedder=embedder)


def test_harness_end_to_end_turns(locomo_file, tmp_path):
    result = run_locomo(_settings(tmp_path, "none"), EvalOptions(locomo_file, memories="turns", ks=(1, 10)))
    assert set(result) == RESULT_KEYS
    assert result["n_questions"] == 5
    assert result["memories"] == 8  # every turn
    assert result["evidence_ceiling"] == 1.0
    assert result["recall_at"]["10"] == 1.0  # eight memories: all of them come back at k=10
    assert result["hit_at"]["10"] == 1.0
    assert 0.0 < result["recall_at"]["1"] <= result["recall_at"]["10"]
    assert result["dialogue_tokens"] == sum(count_tokens(text) for _, text in TURNS.values())
    assert (result["llm_calls"], result["tokens_per_dialogue_token"]) == (0, 0.0)
    assert set(result["by_category"]) == {"1", "2", "3", "4"}


def test_the_harness_reads_locomo_days_as_utc_whatever_the_zone(tmp_path):
    assert eval_settings(Settings(_env_file=None, timezone="Asia/Tokyo"), tmp_path, "hybrid").timezone == "UTC"


def test_harness_end_to_end_observations(locomo_file, tmp_path):
    embedder = "local" if minilm_available() else "none"
    work = tmp_path / "work"
    result = run_locomo(
        _settings(tmp_path, embedder), EvalOptions(locomo_file, memories="observations", ks=(1, 10), work_dir=work)
    )
    assert set(result) == RESULT_KEYS
    assert result["memories"] == 5  # the five observations citing a real turn, none merged
    # covered turns: D1:1, D1:3, D1:2, D2:1, D2:2 -> per question 1, 1/2, 1/2, 1, 0
    assert result["evidence_ceiling"] == round((1 + 0.5 + 0.5 + 1 + 0) / 5, 4)
    assert result["recall_at"]["10"] == result["evidence_ceiling"]  # five memories, k=10
    assert result["llm_calls"] == 1  # both sessions in one extraction call, nothing ambiguous to judge
    assert result["prompt_tokens"] > 0 and result["completion_tokens"] > 0
    assert result["tokens_per_dialogue_token"] == round(
        (result["prompt_tokens"] + result["completion_tokens"]) / result["dialogue_tokens"], 4
    )
    assert (work / "tiny-1-698d199c3991" / "dreamer.db").exists()  # safe_name("tiny-1")


def test_cli_prints_exactly_the_documented_json(locomo_file, tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        app,
        ["eval", "locomo", str(locomo_file), "--memories", "turns", "--search", "text", "--k", "5,10", "--json", "-"],
        env={"DREAMER_EMBEDDER": "none"},
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data) == RESULT_KEYS
    assert list(data["recall_at"]) == ["5", "10"]
