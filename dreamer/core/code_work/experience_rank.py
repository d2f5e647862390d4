"""How experience is read at the start of a task (pure): exact keywords first, then words, then
validation and impact.

The rows given here are already filtered (project, branch, versions, status). Of them:

* **exact keywords** of the query (identifiers: `LegacyTable`, `TS2322`, `clear_selection`,
  `Table.reload`, `ECONNRESET`, and any word an entry lists as a keyword or names as an
  interface) decide first: when some entry carries them, only the entries carrying the most of
  them are kept, so a similar-sounding entry about another contract is not returned;
* then the words: BM25 over each entry's text, conditions and unit (stemmed lightly), plus a
  dense similarity when the caller has one; an entry sharing no word and no meaning is dropped;
* then a rerank: verified above candidate above review_required, and more consumers above fewer.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

STATUS_WEIGHT = {"verified": 1.0, "candidate": 0.6, "review_required": 0.3}
DENSE_FLOOR = 0.3  # a cosine below it is no shared meaning (unrelated sentences score about 0.1)
DENSE_WEIGHT = 2.0
_WORD = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*[A-Za-z0-9_]|[A-Za-z0-9_]")
_IDENT = re.compile(r"[a-z][A-Z]|\d|_|[A-Za-z]\.[A-Za-z]|^[A-Z]{3,}$|[a-z]-[A-Z]|^[A-Z][a-z]+[A-Z]")
_STOP = frozenset(
    "a an and are as at be by do does for from how i if in into is it its of on or that the this to "
    "was we what when where which while with without not no only use using".split()
)


@dataclass(frozen=True)
class Doc:
    """An entry as ranking sees it."""

    key: str
    text: str
    status: str
    consumers: int = 0
    keywords: tuple[str, ...] = ()  # its unit, interfaces and listed keywords
    dense: float = 0.0  # similarity of its text to the query, when an embedder was asked


@dataclass(frozen=True)
class Ranked:
    key: str
    score: float
    exact: tuple[str, ...] = field(default=())


def stem(word: str) -> str:
    """A light stem: emitted, emitting, emits -> emit; tables -> table; passes -> pass."""
    w = word.lower()
    if len(w) <= 3:
        return w
    for suffix in ("ing", "ed"):
        if w.endswith(suffix) and len(w) > len(suffix) + 2:
            w = w[: -len(suffix)]
            return w[:-1] if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls" else w
    if w.endswith(("sses", "xes", "zes", "ches", "shes")):
        return w[:-2]
    if w.endswith("s") and not w.endswith(("ss", "us", "is")):
        return w[:-1]
    return w


def words(text: str) -> list[str]:
    """The stemmed words of `text`, identifiers also split into their parts."""
    out: list[str] = []
    for token in _WORD.findall(text):
        parts = [token, *re.split(r"[._\-]|(?<=[a-z])(?=[A-Z])", token)]
        out.extend(stem(p) for p in dict.fromkeys(parts) if _counts(p))
    return out


def _counts(part: str) -> bool:
    """Whether a word part weighs in the words: not a stop word, nor a lone letter (the "s" of
    "processor's")."""
    return bool(part) and part.lower() not in _STOP and (len(part) > 1 or part.isdigit())


def identifiers(text: str) -> set[str]:
    """The tokens of `text` shaped like identifiers or codes, lowercased."""
    return {t.lower() for t in _WORD.findall(text) if _IDENT.search(t)}


def exact_keywords(query: str, docs: Sequence[Doc]) -> set[str]:
    """The query's identifiers, and its words some entry lists as a keyword."""
    vocab = {k.lower() for d in docs for k in d.keywords}
    plain = {t.lower() for t in _WORD.findall(query)}
    return identifiers(query) | (plain & vocab)


def _carried(doc: Doc, keys: set[str]) -> tuple[str, ...]:
    have = identifiers(doc.text) | {t.lower() for t in _WORD.findall(doc.text)} | {k.lower() for k in doc.keywords}
    return tuple(sorted(keys & have))


def bm25(query: list[str], docs: Sequence[list[str]], k1: float = 1.2, b: float = 0.75) -> list[float]:
    n = len(docs)
    if n == 0:
        return []
    avg = sum(len(d) for d in docs) / n or 1.0
    df = Counter(w for d in docs for w in set(d))
    scores = []
    for d in docs:
        tf = Counter(d)
        s = 0.0
        for w in set(query):
            if tf[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                s += idf * tf[w] * (k1 + 1) / (tf[w] + k1 * (1 - b + b * len(d) / avg))
        scores.append(s)
    return scores


def rank(
    query: str, docs: Sequence[Doc], *, limit: int, min_share: float = 0.35, context: str | None = None
) -> list[Ranked]:
    """The best `limit` entries for `query`, best first (see the module's doc). `context` (the
    unit at hand) is never an exact keyword: naming where one works filters nothing."""
    keys = exact_keywords(query, docs) - ({context.lower()} if context else set())
    carried = {d.key: _carried(d, keys) for d in docs}
    most = max((len(c) for c in carried.values()), default=0)
    pool = [d for d in docs if len(carried[d.key]) == most]
    asked = words(query)
    if context:  # nor does it weigh among the words
        asked = [w for w in asked if w not in set(words(context))]
    text_scores = bm25(asked, [words(d.text) for d in pool])
    top = max(text_scores, default=0.0) or 1.0
    ranked = []
    for d, s in zip(pool, text_scores):
        meaning = s / top + DENSE_WEIGHT * max(d.dense - DENSE_FLOOR, 0.0)
        if meaning <= 0 and most == 0:
            continue
        score = len(carried[d.key]) + meaning + 0.5 * STATUS_WEIGHT.get(d.status, 0.0) + 0.1 * math.log1p(d.consumers)
        ranked.append(Ranked(d.key, score, carried[d.key]))
    ranked.sort(key=lambda r: (-r.score, r.key))
    if ranked:
        floor = ranked[0].score * min_share
        ranked = [r for r in ranked if r.score >= floor]
    return ranked[:limit]


def impact(unit: str | None, depends_on: Sequence[str], state_units: Mapping[str, set[str]]) -> int:
    """How many units consume what an entry is about: the units whose states depend on its unit
    or on anything it depends on (`state_units` maps a target to those units)."""
    targets = [*depends_on, *([f"unit:{unit}"] if unit else [])]
    return len(set().union(*(state_units.get(t, set()) for t in targets))) if targets else 0
