"""Consolidation policy: pure functions deciding what a candidate does to the cabinet.

`decide` looks at a candidate and its nearest current neighbours in the same scope and
returns add / merge / supersede / reject / judge; `resolve` turns an LLM verdict on an
ambiguous pair into a final decision. Nothing here touches SQL, the index or the network.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from typing import Any, Literal

from dreamer.core.implied import counts, implied_reason
from dreamer.core.own_change import not_own_change, whose_change
from dreamer.core.topics import Topic, announces_change, change_words, same_deadline

Action = Literal["add", "merge", "supersede", "reject", "judge"]
Verdict = Literal["same", "update", "contradicts", "new"]
Evidence = dict[str, Any]
"""One entry of a memory's evidence, as its JSON column holds it: session_id, seqs, untrusted."""


def normalise(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w\s]", " ", text)
    return " ".join(text.split())


def content_hash(text: str) -> str:
    """Hash of the normalised text: case, punctuation and spacing do not make a new memory."""
    return hashlib.sha256(normalise(text).encode("utf-8")).hexdigest()


def token_similarity(a: str, b: str) -> float:
    """Jaccard similarity of word sets: the similarity used when no embedder is available."""
    sa, sb = set(normalise(a).split()), set(normalise(b).split())
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)


@dataclass(frozen=True)
class Neighbour:
    memory_id: str
    text: str
    kind: str
    content_hash: str
    similarity: float
    status: str = "candidate"
    topic: str | None = None  # the slot it fills (`dreamer.core.topics`)
    said: date | None = None  # when it was stated (its validity start)
    beside: bool = False  # extracted with the candidate from one session's talk: meant as another fact


@dataclass(frozen=True)
class Decision:
    action: Action
    target: str | None = None  # the memory merged into or superseded; for judge, the first routed
    reason: str = ""
    similarity: float = 0.0
    routed: tuple[str, ...] = ()  # the memories sent to the judge with it, in pair order
    also: tuple[str, ...] = ()  # further memories it supersedes (a slot left with two current values)
    fallback: Decision | None = None  # for judge: what stands when no verdict comes back
    proposed: bool = False  # a supersession nobody judged: held for a person, both facts kept current


@dataclass(frozen=True)
class Thresholds:
    dup: float = 0.90
    ambiguous_low: float = 0.5  # a neighbour at or above it goes to the judge
    max_pairs: int = 3  # judge pairs per candidate at most
    change_low: float = 0.3  # the band's floor for a candidate that announces a change
    margin: float = 0.15  # a band neighbour stands this far above the crowd of related memories


CROWD_RANK = 4  # the crowd's level: the similarity of the fourth nearest related memory


def same_family(kind_a: str, kind_b: str) -> bool:
    from dreamer.core.models import AGENT_KINDS, CODE_KINDS

    for family in (AGENT_KINDS, CODE_KINDS):
        if kind_a in family and kind_b in family:
            return True
    return kind_a == kind_b


def decide(
    text: str,
    kind: str,
    neighbours: list[Neighbour],
    thresholds: Thresholds,
    *,
    topic: Topic | None = None,
    forgotten_hashes: frozenset[str] = frozenset(),
    can_judge: bool = False,
    user_name: str | None = None,
) -> Decision:
    """The fate of one candidate, given its current neighbours in scope: its nearest ones and
    every one filling the same slot (`topic`).

    Only a true restatement merges unjudged: the same content, or a near-duplicate with no
    material difference. The rest of what it may replace (`route`) goes to the judge; without
    one, a newer value of a single-valued slot is only proposed to supersede the older ones
    (`Decision.proposed`: both stay current, "may have changed", for a person), else both are kept."""
    if len(normalise(text)) < 3:
        return Decision("reject", reason="empty after normalisation")
    digest = content_hash(text)
    if digest in forgotten_hashes:
        return Decision("reject", reason="a person forgot this memory")
    for n in neighbours:
        if n.content_hash == digest:
            return Decision("merge", n.memory_id, "same content", 1.0)
    related = sorted((n for n in neighbours if same_family(kind, n.kind)), key=lambda n: (-n.similarity, n.memory_id))
    best = related[0] if related else None
    if best is not None and best.similarity >= thresholds.dup and not material_difference(text, best.text):
        return Decision("merge", best.memory_id, f"restates it, similarity {best.similarity:.2f}", best.similarity)
    routed = route(text, related, thresholds, topic)
    unjudged = _unjudged(text, routed, best, topic, user_name)
    if routed and can_judge:
        ids = tuple(n.memory_id for n in routed)
        reason = f"routed with {len(ids)} ({_why(routed[0], topic)})"
        return Decision("judge", ids[0], reason, routed[0].similarity, routed=ids, fallback=unjudged)
    return unjudged


def route(text: str, related: list[Neighbour], thresholds: Thresholds, topic: Topic | None) -> list[Neighbour]:
    """What the judge sees a candidate with, at most `max_pairs`: every neighbour filling its
    slot first (whatever their similarity), then the nearest it may change without their words
    (`implied_reason`: an ending, another count, another value of one kind, a job elsewhere),
    then the near-duplicates that differ materially, then the band: the rest at or above `ambiguous_low` (`change_low` for a candidate that
    announces a change, being worded away from what it replaces), nearest first. In a crowd of
    alike memories only a band neighbour standing `margin` above the crowd's level is judged:
    a neighbour no nearer than many others is no more likely to be the one replaced. A statement
    extracted `beside` the candidate from the same session is not in the band: the extractor
    already read both and gave them as two facts."""
    slot = [n for n in related if topic is not None and n.topic == topic.key]
    slot += [n for n in related if n not in slot and implied_reason(text, n.text, n.topic)][:1]  # the nearest
    near = [n for n in related if n not in slot and n.similarity >= thresholds.dup]
    change = announces_change(text)
    low = min(thresholds.ambiguous_low, thresholds.change_low) if change else thresholds.ambiguous_low
    bar = max(low, _crowd(related) + thresholds.margin)
    nearest = related[0] if change and related else None  # what a change replaces is most often its nearest
    band = [
        n
        for n in related
        if n not in slot
        and not n.beside
        and n.similarity < thresholds.dup
        and (n.similarity >= bar or (n is nearest and n.similarity >= low))
    ]
    return (slot + near + band)[: thresholds.max_pairs]


def _crowd(related: list[Neighbour]) -> float:
    """The similarity of the `CROWD_RANK`-th nearest related memory (`related` is nearest
    first); 0 with fewer of them."""
    return related[CROWD_RANK - 1].similarity if len(related) >= CROWD_RANK else 0.0


def _why(n: Neighbour, topic: Topic | None) -> str:
    return f"topic {topic.key}" if topic is not None and n.topic == topic.key else f"similarity {n.similarity:.2f}"


def _unjudged(
    text: str, routed: list[Neighbour], best: Neighbour | None, topic: Topic | None, user_name: str | None = None
) -> Decision:
    """Without a verdict nothing is retired: a newer value of a single-valued slot is proposed as
    a change (`proposed`: held for a person, both current, the newer first) unless the statement is
    no change of the user's own (`not_own_change`: another person's, a hypothetical, a plan called
    off, an event that moved, a look-alike word); so is a change said without the old words
    (`implied_reason`: an ending, another count, another value of one kind); anything else is kept beside. A deadline said in fewer words ("the exam", "the
    deadline") takes the one routed deadline it may name (`same_deadline`), when there is one."""
    slot = [n.memory_id for n in routed if topic is not None and n.topic == topic.key]
    if not slot and topic is not None:
        kin = [n.memory_id for n in routed if n.topic is not None and same_deadline(n.topic, topic.key)]
        slot = kin if len(kin) == 1 else []
    if (
        topic is not None
        and topic.cardinality == "one"
        and slot
        and (why := not_own_change(text, topic.key, user_name))
    ):
        return Decision("add", reason=f"kept beside {topic.key}: {why} (no judgement)")
    if topic is not None and topic.cardinality == "one" and slot:
        reason = f"may have changed: newer value of {topic.key} (no judgement, held for review)"
        also = tuple(slot[1:])
        return Decision("supersede", slot[0], reason, routed[0].similarity, routed=(), also=also, proposed=True)
    implied = [(n, why) for n in routed if (why := implied_reason(text, n.text, n.topic))]
    if (
        len(implied) == 1 and whose_change(text, user_name) is None
    ):  # a change said without the old words, of one memory
        n, why = implied[0]
        reason = f"may have changed: {why} (no judgement, held for review)"
        return Decision("supersede", n.memory_id, reason, n.similarity, routed=(), proposed=True)
    if best is None:
        return Decision("add", reason="no neighbour")
    return Decision("add", reason=f"nearest {best.similarity:.2f}")


def in_said_order(decision: Decision, said: date | None, targets_said: Sequence[date | None]) -> Decision:
    """A supersession kept in the order things were said: a statement said before a value it
    would retire (`targets_said`: of its target and its `also`; an old transcript imported after
    what the user said since) is kept beside them, and the newer values stay current."""
    known = [_day(t) for t in targets_said if t is not None]
    if decision.action != "supersede" or said is None or not known:
        return decision
    older, newer = _day(said), max(known)
    if older >= newer:
        return decision
    return Decision(
        "add", reason=f"said {older.isoformat()}, before the current value ({newer.isoformat()}): kept beside"
    )


def _day(when: date) -> date:
    if isinstance(when, datetime):
        return (when.astimezone(UTC) if when.tzinfo is not None else when).date()
    return when


def resolve(decision: Decision, verdicts: Sequence[Verdict | None]) -> Decision:
    """The final decision of a judged candidate, one verdict per routed memory: same merges into
    the first it restates; update or contradicts supersedes each memory so judged; new adds; no
    verdict at all leaves its `fallback`."""
    if decision.action != "judge":
        return decision
    routed = decision.routed
    judged = list(zip(routed, verdicts))
    if not any(v is not None for _, v in judged):
        fallback = decision.fallback or Decision("add", reason="no judgement")
        return replace(fallback, routed=routed, reason=f"{fallback.reason}; no verdict")
    same = [m for m, v in judged if v == "same"]
    if same:
        return Decision("merge", same[0], "judged the same", decision.similarity, routed=routed)
    replaced = [(m, v) for m, v in judged if v in ("update", "contradicts")]
    if replaced:
        first, verdict = replaced[0]
        others = tuple(m for m, _ in replaced[1:])
        return Decision("supersede", first, f"judged {verdict}", decision.similarity, routed=routed, also=others)
    return Decision("add", reason="judged new", routed=routed)


# --------------------------------------------------------------------------- material differences

_NUMBER = re.compile(r"\d+(?:[.,:/]\d+)*")
_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nobody|neither|nor|without|no longer|any ?more|stopped|quit)\b|n't\b",
    re.I,
)
_DATE_WORDS = re.compile(
    r"\b(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    r"today|tomorrow|yesterday|tonight|morning|afternoon|evening|weekend|week|month|year)s?\b",
    re.I,
)
_NAME = re.compile(r"\b[A-Z][\w&-]*")
# Capitalised only for starting a sentence (or being "I"): not names.
_NOT_NAMES = frozenset(
    "i i'm i've i'd i'll the a an my we he she they it its this that these those our their his her your you "
    "user correction actually also now update note yes no so but and or then there here today yesterday "
    "tomorrow currently recently lately still".split()
)


def material_difference(a: str, b: str) -> bool:
    """Whether two similar statements differ in what they claim: a number, a date, a negation
    ("not", "no longer", "never") or a name. Such a pair is never merged unjudged: "the code is
    1234" and "the code is 9876" are two claims, however alike their words. So is a pair one of
    which announces a change in other words ("now runs full marathons" against "runs half
    marathons")."""
    return claims_differ(a, b) or _changed_words(_plain(a), _plain(b))


def claims_differ(a: str, b: str, *, detail: bool = False) -> bool:
    """Whether two statements differ in a number (in digits or words), a date, a negation or a
    name, however alike their other words. With `detail`, one saying a name or a time the other
    leaves out is a detail, not another claim ("a Tesla Model 3" says "a Model 3"), and a
    sentence's capitalised first word is no name."""
    a, b = _plain(a), _plain(b)
    if _numbers(a) != _numbers(b):
        return True
    if len(_NEGATION.findall(a)) != len(_NEGATION.findall(b)):
        return True
    dates, names = (_words(_DATE_WORDS, a), _words(_DATE_WORDS, b)), (_names(a), _names(b))
    if detail:
        names = (_names(_tail(a)), _names(_tail(b)))
        return not (_nested(*dates) and _nested(*names))
    return dates[0] != dates[1] or names[0] != names[1]


def _nested(x: set[str], y: set[str]) -> bool:
    return x <= y or y <= x


def _tail(text: str) -> str:
    """A statement without its first word."""
    return text.strip().partition(" ")[2]


def _plain(text: str) -> str:
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'")


def _numbers(text: str) -> set[float | str]:
    """The numbers a text says, in digits or words alike ("2" and "two", "six" and "nine"), and its
    times and fractions as written ("9:30", "1/2")."""
    return {*counts(text), *(n for n in _NUMBER.findall(text) if ":" in n or "/" in n)}


def _changed_words(a: str, b: str) -> bool:
    """One of the two announces a change and, its change words aside, they say different words."""
    changes_a, changes_b = change_words(a), change_words(b)
    if not (changes_a or changes_b):
        return False
    words_a = set(normalise(a).split()) - {w for c in changes_a for w in c.split()}
    words_b = set(normalise(b).split()) - {w for c in changes_b for w in c.split()}
    return words_a != words_b


def _words(pattern: re.Pattern[str], text: str) -> set[str]:
    return {w.casefold().removesuffix("s") for w in pattern.findall(text)}


def _names(text: str) -> set[str]:
    """Capitalised words but those a sentence starts with as a matter of course: its names."""
    return {w.casefold() for w in _NAME.findall(text)} - _NOT_NAMES


# --------------------------------------------------------------------------- evidence and status


def evidence_sessions(evidence: list[Evidence]) -> set[int]:
    return {int(e["session_id"]) for e in evidence if e.get("session_id") is not None}


def evidence_key(e: Evidence) -> tuple[Any, tuple[Any, ...]]:
    """What makes two evidence entries the same: the session and the messages."""
    return (e.get("session_id"), tuple(e.get("seqs", [])))


def merge_evidence(old: list[Evidence], new: list[Evidence]) -> list[Evidence]:
    """Union by (session, seqs); order kept, nothing counted twice."""
    seen = {evidence_key(e) for e in old}
    out = list(old)
    for e in new:
        key = evidence_key(e)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def promoted_status(status: str, evidence: list[Evidence], *, untrusted: bool = False) -> str:
    """Evidence from two distinct sessions promotes a candidate to verified; an untrusted
    memory is never promoted, and untrusted evidence does not count."""
    trusted = [e for e in evidence if not e.get("untrusted")]
    if status == "candidate" and not untrusted and len(evidence_sessions(trusted)) >= 2:
        return "verified"
    return status
