"""Recall's ranking policy (pure) and the memory documents the index searches with BM25."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dreamer.documents import Said, day, document, evidence_points, render, speakers_of, windows
from dreamer.index import Hit
from dreamer.ranking import Weights, fuse, named_speakers, speaker_matches, without_names

MAY_8 = datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)


def test_named_speakers_are_whole_words_of_first_names():
    speakers = ["Caroline", "Melanie Stone", "Caroline", "Al"]
    assert named_speakers("When did Caroline meet Melanie's sister?", speakers) == ("Caroline", "Melanie Stone")
    assert named_speakers("What did Carolines do?", speakers) == ()
    assert named_speakers("Al is here", speakers) == ("Al",)
    assert named_speakers("anything", []) == ()


def test_without_names_drops_names_and_possessives():
    assert without_names("When did Caroline go to Melanie's party?", ["Caroline", "Melanie Stone"]) == "When did go to party?"
    assert without_names("Caroline", ["Caroline"]) == "Caroline"  # never an empty query


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


def test_day_and_windows():
    assert day(MAY_8) == "8 May 2023"
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
    assert speakers_of(lines, {(1, 2), (1, 3), (1, 4)}) == ("Bob", "Ann")
    # a turn memory is its own line: shown once
    assert render("Ann: We hiked the Alps!", lines[1:2], {(1, 3)}) == "8 May 2023\nAnn: We hiked the Alps!"
