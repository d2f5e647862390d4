from dataclasses import replace

import pytest

from dreamer.core.consolidate import (
    Decision,
    Neighbour,
    Thresholds,
    content_hash,
    decide,
    material_difference,
    merge_evidence,
    promoted_status,
    resolve,
    token_similarity,
)
from dreamer.core.topics import Topic

T = Thresholds(dup=0.90, ambiguous_low=0.75, max_pairs=3)
CITY = Topic("home_city", "one")
HOBBIES = Topic("hobbies", "many")


def n(mid, text, sim, kind="preference", topic=None):
    return Neighbour(mid, text, kind, content_hash(text), sim, topic=topic)


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
    judged = decide("a b c", "preference", neighbours, T, can_judge=True)
    assert (judged.action, judged.routed, judged.fallback) == ("judge", ("m1",), Decision("add", reason="nearest 0.80"))
    assert decide("a b c", "preference", neighbours, T, can_judge=False) == Decision("add", reason="nearest 0.80")


def test_a_memory_of_the_same_topic_is_routed_whatever_its_similarity():
    neighbours = [
        n("near", "The user likes long walks.", 0.80),
        n("old", "The user lives in Boston.", 0.2, topic="home_city"),
    ]
    d = decide("The user moved to Denver.", "profile", neighbours, T, topic=CITY, can_judge=True)
    assert (d.action, d.target, d.routed) == ("judge", "old", ("old", "near"))
    assert d.reason == "routed with 2 (topic home_city)"


def test_routing_is_capped_per_candidate():
    neighbours = [n(f"m{i}", f"hobby {i}", 0.1, topic="hobbies") for i in range(5)] + [n("near", "x y", 0.8)]
    d = decide("The user took up pottery.", "profile", neighbours, T, topic=HOBBIES, can_judge=True)
    assert d.routed == ("m0", "m1", "m2")


def test_a_candidate_that_announces_a_change_is_judged_with_a_farther_neighbour():
    neighbours = [n("old", "The user eats meat every day.", 0.42)]
    changed = decide("The user is vegetarian now.", "profile", neighbours, T, can_judge=True)
    assert (changed.action, changed.routed) == ("judge", ("old",))
    plain = decide("The user is vegetarian.", "profile", neighbours, T, can_judge=True)
    assert plain == Decision("add", reason="nearest 0.42")
    below = decide("The user is vegetarian now.", "profile", [n("old", "x", 0.29)], T, can_judge=True)
    assert below.action == "add"


def test_in_a_crowd_only_a_neighbour_that_stands_out_is_judged():
    band = Thresholds(dup=0.90, ambiguous_low=0.5, max_pairs=3, margin=0.15)
    crowd = [n(f"c{i}", f"talk {i}", s) for i, s in enumerate((0.62, 0.60, 0.58, 0.56, 0.55))]
    assert decide("a b c", "preference", crowd, band, can_judge=True) == Decision("add", reason="nearest 0.62")
    # the crowd's level is the fourth nearest (0.56), so the bar is 0.71
    d = decide("a b c", "preference", [n("out", "x y z", 0.80), *crowd[1:]], band, can_judge=True)
    assert (d.action, d.routed) == ("judge", ("out",))
    few = decide("a b c", "preference", crowd[:3], band, can_judge=True)
    assert few.routed == ("c0", "c1", "c2")


def test_in_a_crowd_a_change_is_still_judged_with_its_nearest():
    band = Thresholds(dup=0.90, ambiguous_low=0.5, max_pairs=3, margin=0.15)
    crowd = [n(f"c{i}", f"talk {i}", s) for i, s in enumerate((0.45, 0.40, 0.38, 0.36, 0.35))]
    d = decide("The user writes Go at work now.", "profile", crowd, band, can_judge=True)
    assert (d.action, d.routed) == ("judge", ("c0",))
    assert decide("The user writes Go at work.", "profile", crowd, band, can_judge=True).action == "add"


def test_a_statement_extracted_beside_the_candidate_is_judged_only_as_a_near_duplicate_or_by_slot():
    beside = Neighbour("pending:0", "Mel paints lakes.", "profile", content_hash("Mel paints lakes."), 0.8, beside=True)
    assert decide("Mel paints to relax.", "profile", [beside], T, can_judge=True).action == "add"
    slot = replace(beside, topic="home_city", similarity=0.2)
    d = decide("The user moved to Denver.", "profile", [slot], T, topic=CITY, can_judge=True)
    assert (d.action, d.routed) == ("judge", ("pending:0",))
    twin = replace(beside, text="The user lives in Oslo.", content_hash=content_hash("x"), similarity=0.95)
    d = decide("The user lives in Bergen.", "profile", [twin], T, can_judge=True)
    assert (d.action, d.routed) == ("judge", ("pending:0",))


def test_without_a_judge_a_newer_single_valued_value_is_only_proposed():
    neighbours = [
        n("old", "The user lives in Boston.", 0.2, topic="home_city"),
        n("older", "Lives in Oslo.", 0.1, topic="home_city"),
    ]
    d = decide("The user moved to Denver.", "profile", neighbours, T, topic=CITY)
    assert (d.action, d.target, d.also, d.proposed) == ("supersede", "old", ("older",), True)
    assert d.reason == "may have changed: newer value of home_city (no judgement, held for review)"


def test_without_a_judge_a_deadline_said_in_fewer_words_supersedes_the_one_it_may_name():
    exam = Topic("deadline:exam", "one")
    neighbours = [
        n("es", "The user's Spanish exam is on 10 December.", 0.8, kind="focus", topic="deadline:spanish_exam")
    ]
    d = decide("The user's exam is now on 14 January.", "focus", neighbours, T, topic=exam)
    assert (d.action, d.target) == ("supersede", "es")
    two = [
        *neighbours,
        n("ms", "The user's maths exam is on 3 December.", 0.8, kind="focus", topic="deadline:maths_exam"),
    ]
    d = decide("The user's exam is now on 14 January.", "focus", two, T, topic=exam)
    assert d.action == "add"  # which of the two exams moved is not said
    other = [n("q3", "The Q3 report is due on 1 May.", 0.8, kind="focus", topic="deadline:q3_report")]
    d = decide("The user's exam is now on 14 January.", "focus", other, T, topic=exam)
    assert d.action == "add"


def test_without_a_judge_a_many_valued_slot_keeps_both():
    neighbours = [n("old", "The user plays chess.", 0.3, topic="hobbies")]
    d = decide("The user took up pottery.", "profile", neighbours, T, topic=HOBBIES)
    assert d == Decision("add", reason="nearest 0.30")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Alice's locker code is 1234.", "Alice's locker code is 9876."),
        ("The user is allergic to penicillin.", "The user is not allergic to penicillin."),
        ("The user takes coffee with 2 sugars.", "Correction: the user takes coffee with 3 sugars now."),
        ("The user eats meat.", "The user no longer eats meat."),
        ("The review is on Monday.", "The review is on Friday."),
        ("The user works at Initech.", "The user works at Globex."),
        ("The user runs half marathons.", "The user now runs full marathons."),
    ],
)
def test_a_near_duplicate_that_differs_materially_is_never_merged_unjudged(old, new):
    assert material_difference(old, new)
    neighbours = [n("m1", old, 0.97)]
    assert decide(new, "profile", neighbours, T, can_judge=True).action == "judge"
    unjudged = decide(new, "profile", neighbours, T)  # never merged, never retired: beside, or held for a person
    assert unjudged.action == "add" or (unjudged.action, unjudged.proposed) == ("supersede", True)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("The user prefers short answers.", "The user likes short answers."),
        ("Alice prefers tea in the morning.", "Alice prefers tea in the mornings."),
        ("The user lives in Denver.", "Currently, the user lives in Denver."),
        ("The user uses Neovim.", "The user uses Neovim now."),
    ],
)
def test_a_restatement_merges(old, new):
    assert not material_difference(old, new)
    d = decide(new, "profile", [n("m1", old, 0.95)], T, can_judge=True)
    assert (d.action, d.target, d.reason) == ("merge", "m1", "restates it, similarity 0.95")


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
    fallback = Decision("add", reason="nearest 0.80")
    judge = Decision("judge", "m1", "routed with 2", 0.8, routed=("m1", "m2"), fallback=fallback)
    assert resolve(judge, ["same", "update"]) == Decision("merge", "m1", "judged the same", 0.8, routed=("m1", "m2"))
    assert resolve(judge, ["new", "same"]).target == "m2"
    assert resolve(judge, ["update", "contradicts"]) == Decision(
        "supersede", "m1", "judged update", 0.8, routed=("m1", "m2"), also=("m2",)
    )
    assert resolve(judge, ["new", "contradicts"]).target == "m2"
    assert resolve(judge, ["new", None]) == Decision("add", reason="judged new", routed=("m1", "m2"))
    assert resolve(judge, [None, None]) == Decision("add", reason="nearest 0.80; no verdict", routed=("m1", "m2"))
    plain = Decision("add")
    assert resolve(plain, ["same"]) is plain


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
