"""Profiles evaluation, the scoring: what a profile's store holds after each session, read
against its annotations (updates routed and resolved, tests answered from the top 5, stale
values returned as current, memories no annotation supports). Pure: the runner hands in rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from dreamer.core.consolidate import claims_differ, normalise
from dreamer.core.models import CURRENT_STATUSES
from dreamer.core.own_change import whose_change
from dreamer.eval.profiles.format import CATEGORIES, MemoryTest, Profile

TOP = 5  # tests read the top 5 of recall
PARAPHRASE = 0.832  # the embedder's similarity from which a memory says a fact in other words (`calibrate`)
Similar = Callable[[str, str], float]  # the embedder's cosine of two texts


@dataclass(frozen=True)
class StoredMemory:
    """A memory row as scoring reads it, with the ids its writes were routed to the judge with."""

    memory_id: str
    text: str
    status: str
    routed: frozenset[str] = frozenset()
    topic: str | None = None
    superseded_by: str | None = None
    past: bool = False  # its time was over when the test was asked

    @property
    def current(self) -> bool:
        return self.status in CURRENT_STATUSES and not self.past


@dataclass
class Scores:
    annotated: int = 0
    routed: int = 0
    resolved: int = 0
    unrouted: list[dict[str, Any]] = field(default_factory=list)
    hits: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    hits_any: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CATEGORIES})
    stale: list[float] = field(default_factory=list)
    must_not_n: int = 0
    supersessions: int = 0
    false_pairs: list[dict[str, str]] = field(default_factory=list)
    stored: int = 0
    noise: int = 0
    facts: int = 0
    heard: int = 0
    pairs: int = 0
    changing: int = 0  # "may have changed" pairs left for a person (a change nobody judged)
    changing_queued: int = 0  # of them, those the review queue holds
    answers: list[dict[str, Any]] = field(default_factory=list)  # each test's top 5 and how it was scored

    def as_json(self) -> dict[str, Any]:
        everything = [h for values in self.hits.values() for h in values]
        return {
            "updates": {
                "annotated": self.annotated,
                "routed": _share(self.routed, self.annotated),
                "resolved": _share(self.resolved, self.annotated),
                "supersessions": self.supersessions,
                "false_supersessions": len(self.false_pairs),
                "false_supersession_rate": _share(len(self.false_pairs), self.supersessions),
                "false_supersession_pairs": self.false_pairs,
                "may_have_changed": self.changing,
                "may_have_changed_queued": self.changing_queued,
            },
            "judge": {"pairs": self.pairs, "pairs_per_memory": _share(self.pairs, self.stored)},
            "tests": {
                "n": len(everything),
                "hit_at_5": _by_category(self.hits),
                "hit_at_5_any": _by_category(self.hits_any),
                "stale_current": _mean(self.stale),
                "stale_n": len(self.stale),
                "must_not_n": self.must_not_n,
            },
            "memories": self.stored,
            "answers": self.answers,
        }


def _by_category(hits: dict[str, list[float]]) -> dict[str, float | None]:
    everything = [h for values in hits.values() for h in values]
    return {"overall": _mean(everything)} | {c: _mean(v) for c, v in hits.items()}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def score_updates(profile: Profile, session: int, memories: Sequence[StoredMemory], scores: Scores) -> None:
    """The updates annotated in `session`, read right after it was dreamed: routed when a memory
    standing for the new fact was routed to the judge with one standing for the old; resolved
    when a memory standing for the old fact is stored and none of them is current, and one
    standing for the new fact is current. The old fact is the one `contradicts` names, in full
    or in fewer words."""
    match = profile.matcher.match
    by_fact: dict[str, list[StoredMemory]] = {}
    for m in memories:
        fact = match(m.text)
        if fact is not None:
            by_fact.setdefault(fact, []).append(m)
    for number, old, new in profile.updates():
        if number != session:
            continue
        olds, news = by_fact.get(normalise(old), []), by_fact.get(normalise(new), [])
        old_ids = {m.memory_id for m in olds}
        routed = any(m.routed & old_ids for m in news)
        scores.annotated += 1
        scores.routed += routed
        scores.resolved += bool(olds) and not any(m.current for m in olds) and any(m.current for m in news)
        if not routed:
            scores.unrouted.append(
                {
                    "user_id": profile.user_id,
                    "session": session,
                    "old": old,
                    "new": new,
                    "old_stored": [m.text for m in olds],
                    "new_stored": [m.text for m in news],
                    "topics": [olds[0].topic if olds else None, news[0].topic if news else None],
                }
            )


def score_supersessions(profile: Profile, memories: Sequence[StoredMemory], scores: Scores) -> None:
    """Every supersession in the profile's store; false when the retired memory stands for a
    fact its successor neither restates nor replaces by an annotation (directly or through
    earlier updates): a fact retired by the wrong successor is falsely retired too, though
    another annotation replaces it."""
    match = profile.matcher.match
    by_id = {m.memory_id: m for m in memories}
    for old in memories:
        new = by_id.get(old.superseded_by or "")
        if old.status != "superseded" or new is None:
            continue
        scores.supersessions += 1
        fact, successor = match(old.text), match(new.text)
        if fact is None or successor == fact or (successor is not None and fact in profile.replaced(successor)):
            continue
        scores.false_pairs.append({"user_id": profile.user_id, "old": old.text, "new": new.text})


def paraphrase(text: str, target: str, similarity: float) -> bool:
    """Whether `text`, `similarity` away from `target` by the embedder, says it in other words: at
    least `PARAPHRASE` alike, with no material difference (a number, a date, a name, a negation)
    and said of the same person ("the user's sister lives in Leeds" is not "lives in Leeds")."""
    if similarity < PARAPHRASE or claims_differ(text, target, detail=True):
        return False
    return whose_change(text) == whose_change(target)


def calibrate(labelled: Sequence[tuple[str, str, float, bool]]) -> float:
    """The similarity threshold that reads the most of a labelled set of (memory, fact, similarity,
    same) right with `paraphrase`'s other checks; ties go to the higher threshold."""
    guarded = [
        (sim, same, not claims_differ(a, b, detail=True) and whose_change(a) == whose_change(b))
        for a, b, sim, same in labelled
    ]
    cuts = sorted({round(sim, 3) for sim, _, _ in guarded})

    def right(cut: float) -> tuple[int, float]:
        return sum((ok and sim >= cut) == same for sim, same, ok in guarded), cut

    return max(cuts, key=right, default=PARAPHRASE)


def says(profile: Profile, text: str, target: str, similar: Similar | None = None) -> bool:
    """Whether a memory's `text` says the fact `target`: the profile's matching rule, else (with
    the embedder's `similar`) a paraphrase of it that stands for no other fact of the profile."""
    if profile.matcher.covers(text, target):
        return True
    if similar is None:
        return False
    own = profile.matcher.match(text)
    return (own is None or own == normalise(target)) and paraphrase(text, target, similar(text, target))


def score_test(
    profile: Profile, test: MemoryTest, hits: Sequence[StoredMemory], scores: Scores, similar: Similar | None = None
) -> None:
    """One test against recall's top 5: `hit_at_5` when a memory saying each required memory
    is among them, `hit_at_5_any` when one saying any of them is; stale (every test with a
    `must_not`, or asked once some annotated fact was replaced) when a current one of them
    (not past at the test's time) says a `must_not` text or any fact replaced by then, whether
    or not the test asks about it."""
    top = hits[:TOP]

    def covers(text: str, target: str) -> bool:
        return says(profile, text, target, similar)

    if test.required:
        found = [any(covers(h.text, r) for h in top) for r in test.required]
        scores.hits[test.category].append(float(all(found)))
        scores.hits_any[test.category].append(float(any(found)))
    unwanted = _unwanted(profile, test)
    scores.must_not_n += bool(test.must_not)
    if unwanted:
        stale = any(h.current and any(covers(h.text, u) for u in unwanted) for h in top)
        scores.stale.append(float(stale))


def answer(profile: Profile, test: MemoryTest, hits: Sequence[StoredMemory], scores: Scores) -> dict[str, Any]:
    """One test as scored (call right after `score_test`): what it asked, the top 5 it was given
    (past ones marked), and the verdicts, for a person to check by hand."""
    return {
        "user_id": profile.user_id,
        "test_id": test.test_id,
        "query": test.query,
        "required": test.required,
        "must_not": test.must_not,
        "top": [h.text + (" (past)" if h.past else "") for h in hits[:TOP]],
        "hit": scores.hits[test.category][-1] if test.required else None,
        "stale": scores.stale[-1] if _unwanted(profile, test) else None,
    }


def _unwanted(profile: Profile, test: MemoryTest) -> list[str]:
    """What a test's top 5 must not serve as current: its `must_not`, and every fact replaced
    by the test's session but those it asks for."""
    replaced = {normalise(old) for number, old, _ in profile.updates() if number <= test.session}
    replaced -= {normalise(r) for r in test.required}  # a fact asked for again is no stale answer
    return list(test.must_not) + sorted(replaced - {normalise(n) for n in test.must_not})


def count_heard(profile: Profile, memories: Sequence[StoredMemory]) -> tuple[int, int]:
    """(annotated facts, facts that some stored memory, current or not, says): how much of
    what the user said the extractor heard."""
    facts = list(dict.fromkeys(normalise(f.text) for s in profile.sessions for f in s.facts))
    covers = profile.matcher.covers
    return len(facts), sum(any(covers(m.text, fact) for m in memories) for fact in facts)


def count_noise(profile: Profile, memories: Sequence[StoredMemory]) -> int:
    """Memories that no annotated fact of the profile supports (`Profile.supports`)."""
    return sum(not profile.supports(m.text) for m in memories)
