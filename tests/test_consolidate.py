import pytest
from pydantic import ValidationError

from dreamer.core.consolidate import (
    JUDGE_SYSTEM,
    Decision,
    Judgements,
    JudgeRequest,
    Neighbour,
    Thresholds,
    content_hash,
    decide,
    merge_evidence,
    promoted_status,
    resolve,
    token_similarity,
    verdicts_by_pair,
)

T = Thresholds(dup=0.90, ambiguous_low=0.75)


def n(mid, text, sim, kind="preference"):
    return Neighbour(mid, text, kind, content_hash(text), sim)


def test_content_hash_ignores_case_punctuation_and_spacing():
    assert content_hash("The user prefers tea.") == content_hash("the  user prefers TEA")
    assert content_hash("The user prefers tea.") != content_hash("The user prefers coffee.")


def test_no_neighbour_adds():
    assert decide("The user prefers tea.", "preference", [], T) == Decision("add", reason="no neighbour")


def test_same_hash_merges_whatever_the_similarity():
    d = decide("The user prefers tea.", "preference", [n("m1", "the user prefers tea", 0.1)], T)
    assert (d.action, d.target, d.reason) == ("merge", "m1", "same content")


def test_similarity_at_threshold_merges_into_the_best():
    d = decide("a b c", "preference", [n("m1", "x", 0.80), n("m2", "y", 0.90)], T)
    assert (d.action, d.target) == ("merge", "m2")


def test_ambiguous_band_is_judged_only_with_an_llm():
    neighbours = [n("m1", "x", 0.80)]
    assert decide("a b c", "preference", neighbours, T, can_judge=True).action == "judge"
    assert decide("a b c", "preference", neighbours, T, can_judge=False).action == "add"


def test_below_band_adds():
    assert decide("a b c", "preference", [n("m1", "x", 0.74)], T, can_judge=True).action == "add"


def test_other_family_is_not_a_merge_target():
    d = decide("a b c", "preference", [n("m1", "x", 0.99, kind="root_cause")], T)
    assert d.action == "add"


def test_forgotten_content_is_rejected():
    text = "The user likes jazz."
    d = decide(text, "preference", [], T, forgotten_hashes=frozenset({content_hash(text)}))
    assert (d.action, d.reason) == ("reject", "a person forgot this memory")


def test_empty_text_is_rejected():
    assert decide(" ... ", "preference", [], T).action == "reject"


def test_resolve_verdicts():
    judge = Decision("judge", "m1", "similarity 0.80", 0.8)
    assert resolve(judge, "same").action == "merge"
    assert resolve(judge, "update") == Decision("supersede", "m1", "judged update", 0.8)
    assert resolve(judge, "contradicts").action == "supersede"
    assert resolve(judge, "new").action == "add"
    assert resolve(judge, None) == Decision("add", reason="no judgement")
    plain = Decision("add")
    assert resolve(plain, "same") is plain


def test_evidence_merge_and_promotion():
    a = [{"session_id": 1, "seqs": [3]}]
    b = [{"session_id": 1, "seqs": [3]}, {"session_id": 2, "seqs": [5]}]
    merged = merge_evidence(a, b)
    assert merged == [{"session_id": 1, "seqs": [3]}, {"session_id": 2, "seqs": [5]}]
    assert promoted_status("candidate", a) == "candidate"
    assert promoted_status("candidate", merged) == "verified"
    assert promoted_status("review_required", merged) == "review_required"


def test_token_similarity():
    assert token_similarity("the user likes tea", "The user likes tea!") == 1.0
    assert token_similarity("a b", "c d") == 0.0
    assert token_similarity("a b c", "a b d") == 0.5


def test_verdicts_by_pair_ignores_out_of_range_and_conflicts():
    result = Judgements(same=[1, 3], update=[0], new=[3, 7], contradicts=[2, 2])
    assert verdicts_by_pair(result, 5) == ["update", "same", "contradicts", None, None]


def test_judgements_are_validated():
    assert Judgements.model_validate_json('{"new": [0, 2]}') == Judgements(new=[0, 2])
    with pytest.raises(ValidationError):
        Judgements.model_validate_json('{"same": [-1]}')
    with pytest.raises(ValidationError):
        Judgements.model_validate_json('{"update": ["first"]}')


def test_judge_prompt_is_numbered_pairs_one_line_each():
    req = JudgeRequest([("The user likes tea.", "The user\nlikes green tea."), ("a  b", "1. c\n-> d")])
    assert req.prompt() == "0. The user likes tea.\n-> The user likes green tea.\n1. a b\n-> 1. c -> d"
    assert "not instructions" in JUDGE_SYSTEM
