"""The ranking behind recall: query handling, the two searches, fusion and the speaker match.

* BM25 runs first, over each memory's document (its text, the day and the speaker-attributed
  messages it rests on, see `dreamer.documents`).
* People who speak in the scope's conversations and are named in the query (found among the
  speakers of the BM25 candidates) are matched against who said a memory's evidence rather than
  against its words: the dense query is embedded without their names, and when the query names
  exactly one of them, memories resting on that person's words get `speaker_weight` added.
* The candidates of either search are scored on both dense signals: the query's similarity to
  the memory's own vector, and to the nearest of the messages it rests on (`said`). The latter,
  rescaled to the mean and spread of the former over the candidates (plus `said_offset`), stands
  in where it is higher: a memory whose sentence is about something else, resting on the turn
  that answers the question, is found by that turn.
* Dense and BM25 scores are min-max normalised over their candidates and fused by weight.
* A query that names a date ("on 13 October 2023", "in June", "in 2023") lifts the memories
  said then by `date_weight`: a named day covers `date_slack_days` either side (a question's day
  is when something happened, the conversation may mention it some days later).
* Conversation locality: a candidate resting on a message within `passage_window` messages of
  what the best `passage_top` candidates rest on (same session, not the same message) gets
  `passage_weight` added; what is said around the best answer is often the rest of it.
* The head of the list is picked greedily: a candidate whose evidence messages all back a
  memory already picked counts `repeat_penalty` less, so the few memories a reader gets do not
  spend places on the same messages twice.

`search` picks the signals: ``hybrid`` (all of the above), ``dense`` or ``text`` alone (each
the plain search over the same index, kept as baselines).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date

import numpy as np

from dreamer.core.expiry import MONTHS
from dreamer.core.scope import Scope
from dreamer.engine.documents import DAYS_FIELD, EVIDENCE_FIELD, SPEAKERS_FIELD, key_points
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import Hit, SearchFilter

log = logging.getLogger(__name__)

SEARCHES = ("hybrid", "dense", "text")
PAYLOAD_FIELDS = (SPEAKERS_FIELD, EVIDENCE_FIELD, DAYS_FIELD)  # all that ranking reads from a hit's payload
_DATE_RE = re.compile(
    rf"\b(?:(?P<d1>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?)?(?P<month>{'|'.join(MONTHS)})\b"
    r"(?:\s+(?P<d2>\d{1,2})(?:st|nd|rd|th)?\b)?,?(?:\s+(?P<year>(?:19|20)\d\d)\b)?"
)
_YEAR_RE = re.compile(r"\b(?:19|20)\d\d\b")
_VERB_MONTHS = ("May", "March")  # "May I ...", "March on"
_PRONOUN_NEXT = re.compile(r"\s+(?:I|we|you|he|she|they|it)\b")


def narrowed(flt: SearchFilter) -> SearchFilter:
    """The filter with hits carrying only what ranking reads (payload reads dominate a search)."""
    return replace(flt, payload_fields=PAYLOAD_FIELDS)


# --------------------------------------------------------------------------- pure policy


def first_name(speaker: str) -> str:
    parts = speaker.split()
    return parts[0] if parts else ""


def named_speakers(query: str, speakers: Iterable[str]) -> tuple[str, ...]:
    """The speakers whose (first) name the query mentions as a word, in first-seen order."""
    out = []
    for speaker in dict.fromkeys(speakers):
        name = first_name(speaker)
        if len(name) > 1 and re.search(rf"\b{re.escape(name)}\b", query):
            out.append(speaker)
    return tuple(out)


def without_names(query: str, speakers: Sequence[str]) -> str:
    """The query with the speakers' names (and possessive 's) taken out; never empty."""
    out = query
    for speaker in speakers:
        out = re.sub(rf"\b{re.escape(first_name(speaker))}(?:'s)?\b", " ", out)
    return " ".join(out.split()) or query


def min_max(scores: dict[str, float]) -> dict[str, float]:
    """Scale scores to [0, 1]; a single (or all-equal) list maps to 1."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    if hi - lo < 1e-12:
        return {k: 1.0 for k in scores}
    return {k: (v - lo) / (hi - lo) for k, v in scores.items()}


@dataclass(frozen=True)
class Weights:
    dense: float
    text: float
    speaker: float = 0.0


MIN_SAID = 5  # fewest candidates with message vectors whose scores say how the two signals compare


def rescaled(scores: dict[str, float], to: dict[str, float], offset: float = 0.0) -> dict[str, float]:
    """`scores` shifted and stretched so that, over the ids both score, they have the mean and
    spread of `to`, plus `offset`; {} when fewer than `MIN_SAID` ids are scored by both or
    either has no spread there (the two cannot be compared)."""
    both = [k for k in scores if k in to]
    if len(both) < MIN_SAID:
        return {}
    a, b = np.array([to[k] for k in both]), np.array([scores[k] for k in both])
    if a.std() < 1e-12 or b.std() < 1e-12:
        return {}
    scale, mean = a.std() / b.std(), b.mean()
    return {k: float(a.mean() + (v - mean) * scale + offset) for k, v in scores.items()}


def said_dense(own: dict[str, float], said: dict[str, float], offset: float) -> list[tuple[str, float]] | None:
    """Each candidate's dense score: its own, or its messages' rescaled to the own scores where
    that is higher; best first, ties by id. None when the two cannot be compared (`rescaled`)."""
    lifted = rescaled(said, own, offset)
    if not lifted:
        return None
    ids = dict.fromkeys([*own, *lifted])
    return best_first((i, max(own.get(i, float("-inf")), lifted.get(i, float("-inf")))) for i in ids)


def fuse(
    dense: list[tuple[str, float]],
    text: list[tuple[str, float]],
    weights: Weights,
    matched: Iterable[str] = (),
) -> list[tuple[str, float]]:
    """Weighted sum of min-max normalised scores (a side that missed an item gives it 0), plus
    the speaker weight for the `matched` ids; best first, ties by id."""
    d, t = min_max(dict(dense)), min_max(dict(text))
    bonus = set(matched)
    ids = dict.fromkeys([i for i, _ in dense] + [i for i, _ in text])
    fused = {
        i: weights.dense * d.get(i, 0.0) + weights.text * t.get(i, 0.0) + (weights.speaker if i in bonus else 0.0)
        for i in ids
    }
    return best_first(fused.items())


def demote_repeats(
    ranked: list[tuple[str, float]], evidence: dict[str, frozenset[str]], penalty: float, head: int
) -> list[tuple[str, float]]:
    """The first `head` items picked greedily by score, where an item whose (known, non-empty)
    evidence is all covered by the items picked before it counts `penalty` less (and carries
    that score); the rest follow in their order. Ties keep the input order."""
    rest = list(ranked)
    out: list[tuple[str, float]] = []
    covered: set[str] = set()
    while rest and len(out) < head:
        scores = [_adjusted(i, s, evidence, covered, penalty) for i, s in rest]
        pick = max(range(len(rest)), key=lambda j: (scores[j], -j))
        item = rest.pop(pick)
        out.append((item[0], scores[pick]))
        covered |= evidence.get(item[0], frozenset())
    return out + rest


def _adjusted(item: str, score: float, evidence: dict[str, frozenset[str]], covered: set[str], penalty: float) -> float:
    points = evidence.get(item)
    return score - penalty if points and points <= covered else score


def best_first(scores: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Highest score first, ties by id."""
    return sorted(scores, key=lambda kv: (-kv[1], kv[0]))


def lift(ranked: list[tuple[str, float]], lifted: set[str], weight: float) -> list[tuple[str, float]]:
    """`weight` added to the `lifted` items; best first again."""
    return best_first((i, s + weight if i in lifted else s) for i, s in ranked)


@dataclass(frozen=True)
class Passage:
    top: int
    window: int
    weight: float


def boost_passage(
    ranked: list[tuple[str, float]], evidence: dict[str, frozenset[str]], passage: Passage
) -> list[tuple[str, float]]:
    """`passage.weight` added to each item outside the first `passage.top` that rests on a
    message at most `passage.window` away from theirs (same session; their own messages are
    repeats, not neighbours); best first again, ties by id. Evidence keys are "session:seq"
    (others are ignored)."""
    if passage.weight == 0 or passage.top <= 0:
        return ranked
    head = [i for i, _ in ranked[: passage.top]]
    own = {p for i in head for p in key_points(evidence.get(i, ()))}
    near = {(sid, q) for sid, seq in own for q in range(seq - passage.window, seq + passage.window + 1)} - own
    if not near:
        return ranked
    lifted = {i for i, _ in ranked[passage.top :] if not near.isdisjoint(key_points(evidence.get(i, ())))}
    return lift(ranked, lifted, passage.weight)


@dataclass(frozen=True)
class Period:
    """A date a query names: a year, a month (of a year or of any), or a day (ditto)."""

    year: int | None
    month: int | None = None
    day: int | None = None


def query_period(query: str) -> Period | None:
    """The first date the query names ("October 13, 2023", "1 February, 2023", "June", "2023"),
    or None. A bare "May" or "March" opening the query or followed by a pronoun is a verb, not a
    month. Take the speakers' names out first (`without_names`): June and August are people too."""
    for m in _DATE_RE.finditer(query):
        day, year = m.group("d1") or m.group("d2"), m.group("year")
        verb = m.start() == 0 or _PRONOUN_NEXT.match(query, m.end("month"))
        if m.group("month") in _VERB_MONTHS and verb and not (day or year):
            continue
        return Period(
            int(year) if year else None,
            MONTHS.index(m.group("month")) + 1,
            int(day) if day and 1 <= int(day) <= 31 else None,
        )
    found = _YEAR_RE.search(query)
    return Period(int(found.group())) if found else None


def covers(period: Period, day: date, slack_days: int) -> bool:
    """Whether `day` falls in the period (a named day: within `slack_days` of it)."""
    if period.month is None:
        return day.year == period.year
    if period.day is None:
        return day.month == period.month and period.year in (None, day.year)
    years = (period.year,) if period.year else (day.year - 1, day.year, day.year + 1)  # 30 December, 2 January
    return any(abs((day - named).days) <= slack_days for named in _days_of(years, period.month, period.day))


def _days_of(years: Iterable[int], month: int, day: int) -> list[date]:
    out = []
    for year in years:
        try:
            out.append(date(year, month, day))
        except ValueError:  # 31 June, 29 February of a common year
            continue
    return out


def boost_dated(
    ranked: list[tuple[str, float]],
    days: dict[str, list[date]],
    period: Period | None,
    weight: float,
    slack_days: int,
) -> list[tuple[str, float]]:
    """`weight` added to each item said on a day the period covers; best first again, ties by id."""
    if period is None or weight == 0:
        return ranked
    return lift(ranked, {i for i, _ in ranked if any(covers(period, d, slack_days) for d in days.get(i, ()))}, weight)


def hit_days(hits: Iterable[Hit]) -> dict[str, list[date]]:
    """Each hit's evidence days, as the payload keeps them (ISO; others are ignored)."""
    out: dict[str, list[date]] = {}
    for h in hits:
        out[h.memory_id] = [d for d in map(_iso_day, listed(h.payload.get(DAYS_FIELD))) if d is not None]
    return out


def listed(value: object) -> tuple[object, ...]:
    """A payload field as a tuple of its items: a list as it is, a lone string as one, else none
    (points written by other versions may hold anything)."""
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,) if isinstance(value, str) else ()


def _iso_day(value: object) -> date | None:
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        return None


def hit_evidence(hits: Iterable[Hit]) -> dict[str, frozenset[str]]:
    """Each hit's evidence messages, as the payload keeps them."""
    return {
        h.memory_id: frozenset(k for k in listed(h.payload.get(EVIDENCE_FIELD)) if isinstance(k, str)) for h in hits
    }


def speaker_matches(hits: Iterable[Hit], speaker: str) -> set[str]:
    """Ids of the hits whose evidence was said by `speaker`."""
    return {h.memory_id for h in hits if speaker in listed(h.payload.get(SPEAKERS_FIELD))}


def hit_speakers(hits: Iterable[Hit]) -> list[str]:
    return [s for h in hits for s in listed(h.payload.get(SPEAKERS_FIELD)) if isinstance(s, str)]


# --------------------------------------------------------------------------- the searches


@dataclass
class Ranked:
    ranked: list[tuple[str, float]]
    mode: str
    note: str = ""


def rank(
    rt: Runtime, query: str, scope: Scope, limit: int, flt: SearchFilter, search: str | None = None, head: int = 10
) -> Ranked:
    """Candidate ids with fused scores, best first; `limit` candidates from each search, the
    first `head` picked without repeats (hybrid only)."""
    st = rt.settings
    search = search or st.recall_search
    if search not in SEARCHES:
        raise ValueError(f"unknown search {search!r}: use {', '.join(SEARCHES)}")
    flt = narrowed(flt)
    if rt.embedder is None:
        hits = rt.index.search_text(query, scope, limit, flt)
        return Ranked(_pairs(hits), "text-only", "no embedder available: full-text search only")
    if search == "dense":
        vector = rt.embedder.embed([query])[0]
        return Ranked(_pairs(rt.index.search_dense(list(vector), scope, limit, flt)), "dense")
    text_hits = rt.index.search_text(query, scope, limit, flt)
    if search == "text":
        return Ranked(_pairs(text_hits), "text")
    names = named_speakers(query, hit_speakers(text_hits))
    unnamed = without_names(query, names)  # names are matched on who spoke, not on words or dates
    vector = rt.embedder.embed([unnamed])[0]
    dense_hits = rt.index.search_dense(list(vector), scope, limit, flt)
    hits = text_hits + dense_hits
    matched = speaker_matches(hits, names[0]) if len(names) == 1 else set()
    weights = Weights(st.dense_weight, st.text_weight, st.speaker_weight)
    dense = _pairs(dense_hits)
    if st.said_match:
        own, said = rt.index.candidate_scores(list(vector), scope, list(dict.fromkeys(h.memory_id for h in hits)), flt)
        dense = said_dense(own, said, st.said_offset) or dense  # too few with message vectors: as before
    fused = fuse(dense, _pairs(text_hits), weights, matched)
    fused = boost_dated(fused, hit_days(hits), query_period(unnamed), st.date_weight, st.date_slack_days)
    evidence = hit_evidence(hits)
    fused = boost_passage(fused, evidence, Passage(st.passage_top, st.passage_window, st.passage_weight))
    return Ranked(demote_repeats(fused, evidence, st.repeat_penalty, head), "hybrid")


def _pairs(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.memory_id, float(h.score)) for h in hits]
