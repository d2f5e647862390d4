"""Recall's ranking policy (pure) and the memory documents the index searches with BM25."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from dreamer.core.days import zone
from dreamer.engine.documents import (
    Document,
    Said,
    document,
    evidence_keys,
    evidence_points,
    key_points,
    render,
    speakers_of,
    windows,
    with_document,
)
from dreamer.index.contract import Hit, IndexPoint
from dreamer.online.ranking import (
    Passage,
    Period,
    Weights,
    boost_dated,
    boost_passage,
    covers,
    demote_repeats,
    fuse,
    hit_days,
    hit_evidence,
    named_speakers,
    query_period,
    rescaled,
    said_dense,
    speaker_matches,
    without_names,
)

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_named_speakers_are_whole_words_of_first_names():
    speakers = ["Caroline", "Melanie Stone", "Caroline", "Al"]
    assert named_speakers("When did Caroline meet Melanie's sister?", speakers) == ("Caroline", "Melanie Stone")
    assert named_speakers("What did Carolines do?", speakers) == ()
    assert named_speakers("Al is here", speakers) == ("Al",)
    assert named_speakers("anything", []) == ()


def test_without_names_drops_names_and_possessives():
    assert (
        without_names("When did Caroline go to Melanie's party?", ["Caroline", "Melanie Stone"])
        == "When did go to party?"
    )
    assert without_names("Caroline", ["Caroline"]) == "Caroline"  # never an empty query


def test_rescaled_maps_the_scores_onto_the_target_over_the_ids_both_score():
    scores = {"a": 0.1, "b": 0.3, "c": 0.2, "d": 0.2, "e": 0.2, "f": 0.9}  # f: only in scores
    to = {"a": 0.5, "b": 0.7, "c": 0.6, "d": 0.6, "e": 0.6, "x": 0.0}  # x: only in the target
    out = rescaled(scores, to, offset=0.01)
    # over a-e: scores mean 0.2, spread 0.0632; target mean 0.6, spread 0.0632: a shift of 0.4
    assert out == pytest.approx({"a": 0.51, "b": 0.71, "c": 0.61, "d": 0.61, "e": 0.61, "f": 1.31})
    assert rescaled({k: scores[k] for k in "abcd"}, to) == {}  # four in common: too few to compare
    assert rescaled({k: 0.3 for k in "abcde"}, to) == {}  # no spread to scale
    assert rescaled({}, to) == {}


def test_said_dense_takes_the_messages_where_they_match_better():
    own = {"a": 0.5, "b": 0.7, "c": 0.6, "d": 0.6, "e": 0.6, "n": 0.65}  # n rests on no message
    said = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.5, "e": 0.5, "z": 0.5}  # z: found by BM25 alone, no own vector
    lifted = rescaled(said, own, 0.05)
    assert lifted == pytest.approx({"a": 0.75, "b": 0.55, "c": 0.65, "d": 0.65, "e": 0.65, "z": 0.65})
    out = said_dense(own, said, 0.05)
    assert [i for i, _ in out] == ["a", "b", "c", "d", "e", "n", "z"]
    assert dict(out) == pytest.approx({"a": 0.75, "b": 0.7, "c": 0.65, "d": 0.65, "e": 0.65, "n": 0.65, "z": 0.65})
    assert said_dense(own, {"a": 0.9, "b": 0.1}, 0.01) is None  # two cannot say how the signals compare


def test_fuse_weights_and_the_speaker_bonus_exactly():
    dense = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
    text = [("b", 10.0), ("d", 4.0), ("a", 2.0)]
    plain = fuse(dense, text, Weights(0.7, 0.3))
    assert dict(plain) == pytest.approx({"a": 0.7, "b": 0.35 + 0.3, "d": 0.3 * 0.25, "c": 0.0})
    boosted = fuse(dense, text, Weights(0.7, 0.3, speaker=0.3), matched={"c", "d"})
    assert [i for i, _ in boosted] == ["a", "b", "d", "c"]
    assert dict(boosted) == pytest.approx({"a": 0.7, "b": 0.65, "d": 0.375, "c": 0.3})


def test_speaker_matches_reads_the_payload():
    hits = [Hit("a", 1.0, {"speakers": ["Ann"]}), Hit("b", 1.0, {"speakers": ["Bob", "Ann"]}), Hit("c", 1.0, {})]
    assert speaker_matches(hits, "Ann") == {"a", "b"}


def test_demote_repeats_picks_the_head_without_spending_places_on_the_same_messages():
    ranked = [("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.5), ("e", 0.4)]
    evidence = {
        "a": frozenset({"1:1"}),
        "b": frozenset({"1:1"}),
        "c": frozenset({"1:1", "1:2"}),
        "d": frozenset({"2:7"}),
    }
    out = demote_repeats(ranked, evidence, 0.3, head=3)
    # b repeats a (0.9 - 0.3 = 0.6): c and d go first; e has no known evidence and never repeats
    assert out == [("a", 1.0), ("c", 0.8), ("b", pytest.approx(0.6)), ("d", 0.5), ("e", 0.4)]
    assert demote_repeats(ranked, evidence, 0.3, head=0) == ranked
    assert demote_repeats(ranked, {}, 0.3, head=5) == ranked
    # a penalty of 0 and ties keep the input order
    assert demote_repeats([("x", 1.0), ("y", 1.0)], {"x": frozenset({"1:1"}), "y": frozenset({"1:1"})}, 0.0, 2) == [
        ("x", 1.0),
        ("y", 1.0),
    ]


def test_boost_passage_lifts_what_rests_near_the_best_candidates_evidence():
    ranked = [("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.7), ("e", 0.6), ("f", 0.5), ("g", 0.4)]
    evidence = {
        "a": frozenset({"1:10"}),
        "b": frozenset({"2:3"}),
        "c": frozenset({"1:10"}),  # the same message as a: a repeat, not a neighbour
        "d": frozenset({"1:15"}),  # 5 away from a: outside the window
        "e": frozenset({"1:14", "7:1"}),  # 4 away from a
        "f": frozenset({"3:10"}),  # another session
        "g": frozenset({"2:1", "bad", "2:x", "--1:3", "\u00b2:3", "2:"}),  # 2 away from b; malformed keys are ignored
    }
    out = boost_passage(ranked, evidence, Passage(top=2, window=4, weight=0.2))
    assert out == [
        ("a", 1.0),
        ("b", 0.9),
        ("c", 0.8),
        ("e", pytest.approx(0.8)),
        ("d", 0.7),
        ("g", pytest.approx(0.6)),
        ("f", 0.5),
    ]
    # only the first `top` set the passage; b is near nothing of a's
    assert boost_passage(ranked, evidence, Passage(top=1, window=4, weight=0.2))[3:5] == [
        ("e", pytest.approx(0.8)),
        ("d", 0.7),
    ]
    assert boost_passage(ranked, evidence, Passage(top=2, window=4, weight=0.0)) == ranked
    assert boost_passage(ranked, evidence, Passage(top=0, window=4, weight=0.2)) == ranked
    assert boost_passage(ranked, {}, Passage(top=2, window=4, weight=0.2)) == ranked
    # two of the best in one session: their own messages stay repeats, whichever comes first
    same = {
        "a": frozenset({"1:10"}),
        "b": frozenset({"1:12"}),
        "c": frozenset({"1:10"}),
        "d": frozenset({"1:16"}),
        "e": frozenset({"1:5"}),
    }
    for order in (["a", "b", "c", "d", "e"], ["b", "a", "c", "d", "e"]):
        out = boost_passage([(i, 1.0 - 0.1 * n) for n, i in enumerate(order)], same, Passage(2, 4, 0.2))
        assert [i for i, _ in out] == [*order[:2], "d", "c", "e"]
    # window 0: only the very messages of the best, which are repeats, so nothing moves
    assert boost_passage(ranked, evidence, Passage(top=2, window=0, weight=0.2)) == ranked


@pytest.mark.parametrize(
    ("query", "period"),
    [
        ("What did Mel show Caroline on October 13, 2023?", Period(2023, 10, 13)),
        ("What did Gina find on 1 February, 2023?", Period(2023, 2, 1)),
        ("What happened on the 3rd of May?", Period(None, 5, 3)),
        ("What happened on 3rd May?", Period(None, 5, 3)),
        ("When did Melanie go camping in June?", Period(None, 6, None)),
        ("What did she start in December 2023?", Period(2023, 12, None)),
        ("How often did she go to the beach in 2023?", Period(2023)),
        ("May I ask what Jon likes?", None),
        ("March 2023 was busy: what happened?", Period(2023, 3, None)),
        ("What did Jon do after the dance class?", None),
        ("Anything on 40 June?", Period(None, 6, None)),
        ("Hi! May I ask what Jon likes?", None),
        ("What did June say?", Period(None, 6, None)),  # a name: rank() takes the speakers' names out first
        (without_names("What did June say on 3 May?", ["June"]), Period(None, 5, 3)),
    ],
)
def test_query_period_reads_the_first_date_a_query_names(query, period):
    assert query_period(query) == period


def test_covers_a_year_a_month_or_a_day_with_slack():
    assert covers(Period(2023), date(2023, 1, 1), 7) and not covers(Period(2023), date(2022, 12, 31), 7)
    assert covers(Period(None, 6), date(2021, 6, 30), 0) and not covers(Period(None, 6), date(2021, 7, 1), 0)
    assert covers(Period(2023, 6), date(2023, 6, 1), 0) and not covers(Period(2023, 6), date(2022, 6, 1), 0)
    assert covers(Period(2023, 10, 13), date(2023, 10, 20), 7) and not covers(
        Period(2023, 10, 13), date(2023, 10, 21), 7
    )
    assert covers(Period(2023, 10, 13), date(2023, 10, 6), 7) and not covers(Period(2023, 10, 13), date(2023, 10, 5), 7)
    assert covers(Period(None, 10, 13), date(2021, 10, 14), 1)  # a day without a year: that day of the evidence's year
    assert not covers(Period(2023, 6, 31), date(2023, 6, 30), 7)  # no such day
    # a day without a year is looked for in the evidence's year and the years either side
    assert covers(Period(None, 12, 30), date(2024, 1, 2), 7) and covers(Period(None, 1, 2), date(2023, 12, 29), 7)
    assert covers(Period(None, 2, 29), date(2024, 3, 2), 7) and not covers(Period(None, 2, 29), date(2023, 3, 1), 7)


def test_boost_dated_lifts_what_was_said_then():
    ranked = [("a", 1.0), ("b", 0.9), ("c", 0.8), ("d", 0.7)]
    days = {"a": [date(2023, 5, 1)], "c": [date(2023, 1, 2), date(2023, 6, 3)], "d": [date(2022, 6, 9)]}
    out = boost_dated(ranked, days, Period(2023, 6), 0.3, 7)
    assert out == [("c", pytest.approx(1.1)), ("a", 1.0), ("b", 0.9), ("d", 0.7)]
    assert boost_dated(ranked, days, None, 0.3, 7) == ranked
    assert boost_dated(ranked, days, Period(2023, 6), 0.0, 7) == ranked
    hits = [
        Hit("a", 1.0, {"said_on": ["2023-05-01", "not a day", 7]}),
        Hit("b", 1.0, {}),
        Hit("c", 1.0, {"said_on": "2023-05-08"}),
        Hit("d", 1.0, {"said_on": 20230508}),
    ]
    assert hit_days(hits) == {"a": [date(2023, 5, 1)], "b": [], "c": [date(2023, 5, 8)], "d": []}


def test_hit_evidence_reads_the_payload():
    hits = [
        Hit("a", 1.0, {"evidence_at": ["1:2", "3:4", 5, ["1:2"]]}),
        Hit("b", 1.0, {}),
        Hit("c", 1.0, {"evidence_at": "1:2"}),
        Hit("d", 1.0, {"evidence_at": 12}),
    ]
    assert hit_evidence(hits) == {
        "a": frozenset({"1:2", "3:4"}),
        "b": frozenset(),
        "c": frozenset({"1:2"}),
        "d": frozenset(),
    }


def test_windows():
    points = evidence_points([{"session_id": 3, "seqs": [1, 5]}, {"session_id": None, "seqs": [2]}, {"seqs": [9]}])
    assert points == {(3, 1), (3, 5)}
    assert windows(points, 2) == {3: {1, 2, 3, 4, 5, 6, 7}}
    assert windows({(1, 4)}, 0) == {1: {4}}


def test_document_carries_day_text_context_and_speakers():
    lines = [
        Said(1, 2, "Bob", "How was the trip?", MAY_8),
        Said(1, 3, "Ann", "We hiked the Alps!", MAY_8),
        Said(1, 4, None, "tool output", MAY_8),
    ]
    doc = document("Ann hiked the Alps.", [{"session_id": 1, "seqs": [3]}], lines)
    assert doc.text == "8 May 2023\nAnn hiked the Alps.\nBob: How was the trip?\nAnn: We hiked the Alps!\ntool output"
    assert doc.speakers == ("Ann",)
    assert doc.evidence == ("1:3",)
    assert doc.days == ("2023-05-08",)
    assert doc.said == ("We hiked the Alps!",)  # the evidence message alone, for its vector
    assert speakers_of(lines, {(1, 2), (1, 3), (1, 4)}) == ("Bob", "Ann")
    # a turn memory is its own line: shown once
    assert render("Ann: We hiked the Alps!", lines[1:2], {(1, 3)}) == "8 May 2023\nAnn: We hiked the Alps!"


def test_a_documents_days_are_the_users():
    night = datetime(2023, 5, 9, 2, 30)  # UTC; still 8 May in California
    lines = [Said(1, 3, "Ann", "We hiked the Alps!", night)]
    doc = document("Ann hiked the Alps.", [{"session_id": 1, "seqs": [3]}], lines, zone("America/Los_Angeles"))
    assert (doc.text.splitlines()[0], doc.days) == ("8 May 2023", ("2023-05-08",))
    utc = document("Ann hiked the Alps.", [{"session_id": 1, "seqs": [3]}], lines)
    assert (utc.text.splitlines()[0], utc.days) == ("9 May 2023", ("2023-05-09",))


def test_evidence_keys_and_the_indexed_payload():
    assert evidence_keys({(3, 10), (1, 2), (3, 9)}) == ("1:2", "3:9", "3:10")
    assert key_points(evidence_keys({(3, 10), (1, 2), (-1, 9)})) == [(-1, 9), (1, 2), (3, 10)]  # the inverse
    assert key_points(["1:2", "--1:3", "\u00b2:3", "2:", 5, "x"]) == [(1, 2)]
    point = IndexPoint("m1", "Ann hiked.", None, {"user_id": "u"})
    indexed = with_document(point, Document("doc text", ("Ann",), ("1:3",), ("2023-05-08",)))
    assert indexed.payload == {"user_id": "u", "speakers": ["Ann"], "evidence_at": ["1:3"], "said_on": ["2023-05-08"]}
    assert indexed.document == "doc text"
    assert with_document(point, None) is point
    doc = Document("doc text", ("Ann",), ("1:3", "1:5"), (), ("We hiked.", "It rained."))
    vectors = {"We hiked.": [1.0, 0.0], "It rained.": [0.0, 1.0], "other": [0.5, 0.5]}
    assert with_document(point, doc, vectors).said == []  # a sparse-only point has no dense vectors at all
    dense = IndexPoint("m1", "Ann hiked.", [0.6, 0.8], {"user_id": "u"})
    assert with_document(dense, doc, vectors).said == [[1.0, 0.0], [0.0, 1.0]]
    assert with_document(dense, doc, None).said == []
