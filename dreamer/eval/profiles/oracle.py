"""Profiles evaluation, the stand-ins: the oracle judge (the only part of a run besides scoring
that reads the annotations: the ceiling routing allows), a judge that counts the pairs it is
asked, and the replay extractor (a session's annotated facts as its candidates)."""

from __future__ import annotations

from dreamer.core.consolidate import Verdict
from dreamer.core.models import AGENT_KINDS
from dreamer.engine.consolidation.judge import Judge, JudgePair, JudgeResult
from dreamer.engine.extraction.extract import Candidate, ExtractResult, Kind
from dreamer.engine.extraction.transcript import Chunk
from dreamer.eval.locomo_replay import kind_of
from dreamer.eval.profiles.format import Fact, Profile

IMPORTANCE = {"high": 0.9, "medium": 0.6, "low": 0.3}


class OracleJudge:
    """Answers from the annotations of the profile being dreamed: `update` when the new text
    stands for a fact annotated as replacing the old one's (directly or through earlier
    updates), `same` when both stand for one fact, `new` otherwise."""

    name = "oracle"

    def __init__(self, profile: Profile | None = None) -> None:
        self.profile = profile

    def judge(self, pairs: list[JudgePair]) -> JudgeResult:
        return JudgeResult(verdicts=[self.verdict(p.old.text, p.new.text) for p in pairs])

    def verdict(self, old: str, new: str) -> Verdict:
        if self.profile is None:
            return "new"
        match = self.profile.matcher.match
        old_fact, new_fact = match(old), match(new)
        if old_fact is None or new_fact is None:
            return "new"
        if old_fact == new_fact:
            return "same"
        if old_fact in self.profile.replaced(new_fact):
            return "update"
        return "new"


class CountingJudge:
    """A judge that counts the pairs it is asked about, then asks `inner`."""

    def __init__(self, inner: Judge) -> None:
        self.inner = inner
        self.name = inner.name
        self.pairs = 0

    def judge(self, pairs: list[JudgePair]) -> JudgeResult:
        self.pairs += len(pairs)
        return self.inner.judge(pairs)


class ReplayExtractor:
    """The session being dreamed's annotated facts as its candidates, resting on its new lines."""

    name = "replay"

    def __init__(self) -> None:
        self.facts: list[Fact] = []

    def extract(self, chunk: Chunk, mode: str) -> ExtractResult:
        seqs = chunk.seqs
        return ExtractResult(candidates=[candidate(f, seqs) for f in self.facts] if seqs else [])


def candidate(fact: Fact, seqs: list[int]) -> Candidate:
    kind: Kind = fact.kind if fact.kind in AGENT_KINDS else kind_of(fact.text)  # type: ignore[assignment]
    return Candidate(
        kind=kind, text=fact.text, seqs=seqs, importance=IMPORTANCE.get(fact.importance.lower(), 0.5), tags=["replay"]
    )
