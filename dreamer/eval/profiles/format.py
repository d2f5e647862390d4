"""Profiles evaluation, the pure parts: reading a profiles file (users whose facts change over
sessions, with annotated updates and memory tests), and the one matching rule that says which
annotated fact a stored memory stands for.

The matching rule, the same for every extractor: a memory stands for the annotated fact (or
required memory) of its profile whose normalised text it equals; else for the one whose content
words it covers the most, each word weighted by how rare it is among the profile's facts (a
city or a product name counts more than "lives" or "uses"; a name or a number, double), when
that covered share is at least `MATCH_SHARE`; ties go to the fact sharing the larger part of the
memory's words. A memory and a fact must agree on negation: "no longer uses Outlook" does not
stand for "reads email in Outlook". Nothing here
touches SQL, the index or the network; `dreamer.eval.profiles.run` runs the pipeline.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamer.core.consolidate import normalise
from dreamer.core.errors import IngestError
from dreamer.eval.locomo import read_document

CATEGORIES = (
    "simple_recall",
    "contradiction_update",
    "implicit_preference",
    "temporal_relevance",
    "consolidation",
    "noise_resistance",
    "cross_session",
)
MATCH_SHARE = 0.5
ROLES = ("user", "assistant", "system", "tool")
NEGATION = re.compile(r"\b(?:not|no|never|no longer|quit|quits|stopped|gave up|given up)\b|n't\b", re.I)
_NEGATION_WORDS = frozenset({"not", "no", "never", "longer", "quit", "stop", "gave", "given", "up"})
STOP_WORDS = frozenset(
    "a an the and or but of to in on at for with from by as is are was were be been being it its this that "
    "these those their them they he she his her user user's users s i me my we our you your has have had do "
    "does did not no now so than then there here very just also still about into over after before again "
    "who whom which what when where why how all any some more most other such only own same too can will".split()
)


@dataclass(frozen=True)
class Fact:
    text: str
    kind: str
    importance: str
    contradicts: str | None


@dataclass(frozen=True)
class ProfileSession:
    number: int
    turns: list[dict[str, str]]
    facts: list[Fact]
    time: datetime | None = None  # when it was said (optional): what is dated counts from it


@dataclass(frozen=True)
class MemoryTest:
    test_id: str
    session: int
    query: str
    required: list[str]
    category: str
    must_not: list[str] = field(default_factory=list)
    time: datetime | None = None  # when it is asked (optional): a fact whose time is over by then is past


@dataclass
class Profile:
    user_id: str
    sessions: list[ProfileSession]
    tests: list[MemoryTest]
    matcher: Matcher = field(init=False)

    links: list[tuple[int, str, str]] = field(init=False)

    def __post_init__(self) -> None:
        texts = [f.text for s in self.sessions for f in s.facts] + [r for t in self.tests for r in t.required]
        self.matcher = Matcher(texts, also=[n for t in self.tests for n in t.must_not])
        self.links = []
        earlier: list[str] = []
        for session in self.sessions:
            for f in session.facts:
                if f.contradicts:
                    old = self.matcher.resolve(f.contradicts, earlier) or f.contradicts
                    self.links.append((session.number, old, f.text))
            earlier += [f.text for f in session.facts]

    def updates(self) -> list[tuple[int, str, str]]:
        """(session number, old fact, new fact) of each annotated update, in session order; the
        old fact is the earlier fact its `contradicts` names, in full or in fewer words."""
        return list(self.links)

    def ever_replaced(self) -> set[str]:
        """The normalised facts some annotation replaces."""
        return {normalise(old) for _, old, _ in self.links}

    def supports(self, text: str) -> bool:
        """Whether an annotated fact says what `text` says (`Matcher.supports`), or `text` ends
        a fact that an annotation replaces ("no longer uses Outlook" when Outlook was replaced)."""
        if self.matcher.supports(text):
            return True
        if not NEGATION.search(text):
            return False
        return any(self.matcher.about(old, text, ending=True) for old in self.ever_replaced())

    def replaced(self, fact: str) -> set[str]:
        """The normalised facts `fact` replaces, directly or through earlier updates."""
        back = {normalise(new): normalise(old) for _, old, new in self.updates()}
        out: set[str] = set()
        key = normalise(fact)
        while key in back and back[key] not in out:
            key = back[key]
            out.add(key)
        return out


def stems(text: str) -> list[str]:
    """The content words of a text, lowercased, without stop words and common endings."""
    return [stem for stem, _ in _words(text)]


def names(text: str) -> set[str]:
    """The content words of a text said as a name (capitalised after its first word) or a number."""
    return {stem for stem, name in _words(text) if name}


def _stem(word: str) -> str:
    """`word` without a common ending, keeping at least three letters, and without the doubled
    consonant the ending brought ("running" and "runs" -> "run", "eats" -> "eat")."""
    for suffix in ("ing", "ed", "es", "s"):
        if suffix == "es" and not word.endswith(("ses", "xes", "zes", "ches", "shes")):
            continue
        if len(word) >= len(suffix) + 3 and word.endswith(suffix) and not word.endswith("ss"):
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
                word = word[:-1]
            break
    return word


def _words(text: str) -> list[tuple[str, bool]]:
    out = []
    raw = re.sub(r"[^\w\s]", " ", unicodedata.normalize("NFKC", text)).split()
    for k, said in enumerate(raw):
        word = said.casefold()
        if word in STOP_WORDS or len(word) < 2:
            continue
        word = _stem(word)
        out.append((word, (k > 0 and said[:1].isupper()) or any(c.isdigit() for c in said)))
    return out


# Words that say a change happened, or a light verb, not what changed: "switched to decaf" is
# about decaf, "no longer uses Outlook" about Outlook, "handed in their notice at X" about X.
_CHANGE_WORDS = frozenset(
    _stem(w)
    for w in "switched swapped started began begun again anymore instead finally recently officially handed "
    "notice uses using doing".split()
)


class Matcher:
    """Which of a profile's facts a memory's text stands for, by the module's matching rule.
    `also`: texts that are no fact but are matched against (a test's `must_not`): their words
    are weighed with the facts'."""

    def __init__(self, facts: list[str], also: list[str] | None = None) -> None:
        self.facts = list(dict.fromkeys(normalise(f) for f in facts))
        self.words = [set(stems(f)) for f in self.facts]
        self.negated = [bool(NEGATION.search(f)) for f in self.facts]
        every = self.words + [set(stems(t)) for t in also or []]
        df = Counter(w for words in every for w in words)
        n = len(every)
        said_as_names = set().union(*(names(f) for f in facts + (also or []))) if facts or also else set()
        self.weight = {w: math.log(1 + n / c) * (2 if w in said_as_names else 1) for w, c in df.items()}
        self.unseen = math.log(1 + n) * 2  # a word no fact has: as rare as can be

    def share(self, text: str, target: str) -> float:
        """How much of `target`'s content, weighed by rarity, `text` covers (0 when the two
        disagree on negation)."""
        if bool(NEGATION.search(text)) != bool(NEGATION.search(target)):
            return 0.0
        words, wanted = set(stems(text)) - _NEGATION_WORDS, set(stems(target)) - _NEGATION_WORDS
        total = sum(self.weight.get(w, self.unseen) for w in wanted)
        covered = sum(self.weight.get(w, self.unseen) for w in wanted & words)
        return round(covered / total, 9) if total else 0.0  # rounded: the order of a set's sum is not

    def covers(self, text: str, target: str) -> bool:
        """Whether `text` says what `target` says: the same normalised text, the fact `text`
        stands for, or at least `MATCH_SHARE` of `target`'s weighed content and more of it than
        of the fact `text` stands for (a new employer's line covers some of the old one's words)."""
        norm, best = normalise(target), self.match(text)
        if normalise(text) == norm or best == norm:
            return True
        share = self.share(text, target)
        return share >= MATCH_SHARE and (best is None or share > self.share(text, best))

    def supports(self, text: str) -> bool:
        """Whether an annotated fact says what `text` says: the fact it stands for, or one that
        covers at least `MATCH_SHARE` of a text of two content words or a name, said in fewer
        words ("quit keto" for "stopped doing keto", "is in Leeds" for "lives in Leeds")."""
        if self.match(text) is not None:
            return True
        content = set(stems(text)) - _NEGATION_WORDS
        if len(content) < 2 and not content & names(text):  # "loves it" says nothing; "is in Leeds" does
            return False
        return any(self.share(fact, text) >= MATCH_SHARE or self.about(fact, text) for fact in self.facts)

    def about(self, fact: str, text: str, *, ending: bool = False) -> bool:
        """Whether `fact` covers at least `MATCH_SHARE` of what `text` is about: its content
        words without the words of change ("switched to decaf" is about decaf). The two must
        agree on negation, unless `ending` (`text` ends what `fact` said)."""
        if not ending and bool(NEGATION.search(fact)) != bool(NEGATION.search(text)):
            return False
        wanted = set(stems(text)) - _NEGATION_WORDS - _CHANGE_WORDS
        total = sum(self.weight.get(w, self.unseen) for w in wanted)
        covered = sum(self.weight.get(w, self.unseen) for w in wanted & set(stems(fact)))
        return bool(total) and round(covered / total, 9) >= MATCH_SHARE

    def resolve(self, named: str, among: list[str]) -> str | None:
        """The text in `among` that `named` names, in full or in fewer words: the same
        normalised text, else the one sharing the most weighed content either way round."""
        norm = normalise(named)
        for text in among:
            if normalise(text) == norm:
                return text
        scored = [(max(self.share(text, named), self.share(named, text)), text) for text in among]
        best = max(scored, default=(0.0, ""))
        return best[1] if best[0] >= MATCH_SHARE else None

    def match(self, text: str) -> str | None:
        """The normalised fact `text` stands for, or None."""
        norm = normalise(text)
        if norm in self.facts:
            return norm
        words, negated = set(stems(text)), bool(NEGATION.search(text))
        best: tuple[float, float, str] | None = None
        for fact, fact_words, fact_negated in zip(self.facts, self.words, self.negated):
            total = sum(self.weight[w] for w in fact_words)
            if not total or fact_negated != negated:
                continue
            share = round(sum(self.weight[w] for w in fact_words & words) / total, 9)
            overlap = len(fact_words & words) / len(fact_words | words) if words else 0.0
            if share >= MATCH_SHARE and (best is None or (share, overlap) > best[:2]):
                best = (share, overlap, fact)
        return best[2] if best else None


# --------------------------------------------------------------------------- reading the file


def load_profiles(path: Path) -> list[Profile]:
    """Every profile of the file, checked whole before anything runs: any entry the harness
    cannot read refuses the file with `IngestError` naming the entry and what is wrong."""
    items = read_document(path, entry="profile")
    profiles: list[Profile] = []
    seen: set[str] = set()
    for index, item in enumerate(items, start=1):
        try:
            profile = _profile(item)
        except ValueError as exc:
            raise IngestError(f"{path}: profile {index}: {exc}") from exc
        if profile.user_id in seen:
            raise IngestError(f"{path}: profile {index}: user_id {profile.user_id!r} appears twice")
        seen.add(profile.user_id)
        profiles.append(profile)
    return profiles


def _profile(item: Any) -> Profile:
    if not isinstance(item, dict):
        raise ValueError("is not an object")
    user_id = _text(item, "user_id")
    sessions = [_session(s, k) for k, s in enumerate(_list(item, "sessions"), start=1)]
    numbers = [s.number for s in sessions]
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"({user_id}): a session_id appears twice")
    tests = [_test(t, k, set(numbers)) for k, t in enumerate(_list(item, "memory_tests", required=False), start=1)]
    return Profile(user_id=user_id, sessions=sorted(sessions, key=lambda s: s.number), tests=tests)


def _session(item: Any, k: int) -> ProfileSession:
    if not isinstance(item, dict):
        raise ValueError(f"session {k} is not an object")
    number = item.get("session_id")
    if not isinstance(number, int) or isinstance(number, bool):
        raise ValueError(f"session {k}: session_id must be an integer")
    turns = []
    for j, turn in enumerate(_list(item, "turns", required=False), start=1):
        if not isinstance(turn, dict) or turn.get("role") not in ROLES or not isinstance(turn.get("content"), str):
            raise ValueError(f"session {number}: turn {j} needs a role ({', '.join(ROLES)}) and a text content")
        turns.append({"role": str(turn["role"]), "content": str(turn["content"])})
    facts = [_fact(f, number, j) for j, f in enumerate(_list(item, "expected_memories_after", required=False), 1)]
    return ProfileSession(number=number, turns=turns, facts=facts, time=_time(item, f"session {number}"))


def _fact(item: Any, session: int, j: int) -> Fact:
    where = f"session {session}: expected memory {j}"
    if not isinstance(item, dict):
        raise ValueError(f"{where} is not an object")
    text = _text(item, "fact", where)
    contradicts = item.get("contradicts")
    if contradicts is not None and (not isinstance(contradicts, str) or not contradicts.strip()):
        raise ValueError(f"{where}: contradicts must be the text of an earlier fact")
    kind, importance = item.get("type", ""), item.get("importance", "")
    return Fact(text=text, kind=str(kind or ""), importance=str(importance or ""), contradicts=contradicts or None)


def _test(item: Any, k: int, sessions: set[int]) -> MemoryTest:
    if not isinstance(item, dict):
        raise ValueError(f"memory test {k} is not an object")
    test_id = str(item.get("test_id") or k)
    where = f"memory test {test_id}"
    session = item.get("session")
    if not isinstance(session, int) or isinstance(session, bool) or session not in sessions:
        raise ValueError(f"{where}: session must name one of the profile's session_ids")
    category = item.get("category")
    if category not in CATEGORIES:
        raise ValueError(f"{where}: category must be one of {', '.join(CATEGORIES)}")
    required, must_not = item.get("required_memories") or [], item.get("must_not") or []
    for key, value in (("required_memories", required), ("must_not", must_not)):
        if not isinstance(value, list) or not all(isinstance(r, str) and r.strip() for r in value):
            raise ValueError(f"{where}: {key} must be a list of texts")
    query = _text(item, "query", where)
    return MemoryTest(test_id, session, query, list(required), str(category), list(must_not), _time(item, where))


def _time(item: dict[str, Any], where: str) -> datetime | None:
    """The optional `time` of a session or a test: an ISO 8601 date or time (naive: UTC)."""
    value = item.get("time")
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError as exc:
        raise ValueError(f"{where}: time must be an ISO 8601 date or time, not {value!r}") from exc
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _text(item: dict[str, Any], key: str, where: str = "") -> str:
    value = item.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where + ': ' if where else ''}{key} must be a non-empty text")
    return value.strip()


def _list(item: dict[str, Any], key: str, *, required: bool = True) -> list[Any]:
    value = item.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{key} must be a list")
    return value
