"""Grounded, or not stored: each candidate of an extraction call checked against the lines of
its session the call showed (`core.grounding`), and, when only its wording is its own, against
them in embedding space. A candidate that fails carries its reason (`Candidate.ungrounded`): the
pass records it as rejected and never plans or stores it."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from sqlalchemy import func, or_
from sqlmodel import col, select

from dreamer.core.models import CURRENT_STATUSES, Memory
from dreamer.core.trust.grounding import Message, Verdict, check, read_for, settle
from dreamer.engine.extraction.extract import Candidate, extraction_card
from dreamer.engine.extraction.transcript import Line
from dreamer.engine.runtime import Runtime
from dreamer.llm.cards import card_text, examples
from dreamer.store.db import session_scope

_QUOTED = re.compile(r'"([A-Z][^"\n]{8,})"')  # a sentence a card quotes in its rubric

REMEMBERED = 200  # most memories read to find the names a candidate's session never gave
Shared = tuple[int, Candidate]  # a candidate given to one session (its index), with that session's own seqs


@lru_cache(maxsize=4)
def card_examples(mode: str) -> tuple[str, ...]:
    """The sentences the extraction card of `mode` (the team card for `team`) shows the model:
    its worked examples' items and the sentences its rubric quotes."""
    card = "team" if mode == "team" else extraction_card(mode)[0]
    texts: list[str] = []
    for example in examples(card):
        answer = json.loads(example.answer)
        items = [item for kind in answer.values() if isinstance(kind, list) for item in kind]
        texts += [item["text"] for item in items if isinstance(item, dict) and isinstance(item.get("text"), str)]
    texts += _QUOTED.findall(card_text(card))
    return tuple(dict.fromkeys(texts))


def ground(rt: Runtime, user_id: str, shared: list[Shared], sessions: dict[int, list[Line]], mode: str) -> list[Shared]:
    """Each shared candidate with its verdict: `ungrounded` holds why it is not grounded, None
    when it is. `sessions`: each session's lines the call showed, numbered with its own seqs. A
    candidate naming what the session never gave is checked again with the user's current
    memories that hold those names (an update names what it updates)."""
    verdicts = [_verdict(cand, sessions.get(i, []), mode) for i, cand in shared]
    unsaid = sorted({w for v in verdicts for w in v.unsaid})
    if unsaid:
        known = remembered(rt, user_id, unsaid)
        verdicts = [
            _verdict(cand, sessions.get(i, []), mode, known) if v.unsaid else v
            for (i, cand), v in zip(shared, verdicts)
        ]
    similar = _similarities(rt, [cand for _, cand in shared], verdicts, sessions, [i for i, _ in shared])
    threshold = rt.settings.grounding_min_similarity
    settled = [settle(v, s, threshold) for v, s in zip(verdicts, similar)]
    return [(i, cand.model_copy(update={"ungrounded": v.reason})) for (i, cand), v in zip(shared, settled)]


def messages(lines: Sequence[Line]) -> list[Message]:
    """A session's shown lines as grounding reads them."""
    return [Message(ln.seq, ln.text, ln.day, ln.context_only) for ln in lines]


def _verdict(cand: Candidate, lines: list[Line], mode: str, known: Sequence[str] = ()) -> Verdict:
    speakers = sorted({ln.name for ln in lines if ln.name})
    return check(cand.text, cand.seqs, messages(lines), speakers=speakers, examples=card_examples(mode), known=known)


def remembered(rt: Runtime, user_id: str, words: list[str]) -> list[str]:
    """The texts of the user's current memories that hold any of `words` (case ignored), at most
    `REMEMBERED` of them."""
    probes = [func.lower(Memory.text).like(f"%{_escaped(w.casefold())}%", escape="\\") for w in words]
    with session_scope(rt.engine) as s:
        current = col(Memory.user_id) == user_id, col(Memory.status).in_(CURRENT_STATUSES)
        return list(s.exec(select(Memory.text).where(*current, or_(*probes)).limit(REMEMBERED)).all())


def _escaped(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _similarities(
    rt: Runtime,
    candidates: list[Candidate],
    verdicts: list[Verdict],
    sessions: dict[int, list[Line]],
    owners: list[int],
) -> list[float | None]:
    """For each loose verdict, the cosine similarity of its candidate to the nearest message it is
    read against (one embedding call for the lot); None elsewhere, and without an embedder."""
    out: list[float | None] = [None] * len(candidates)
    loose = [k for k, v in enumerate(verdicts) if v.loose]
    if rt.embedder is None or not loose:
        return out
    texts: list[str] = []
    spans: list[tuple[int, int, int]] = []  # (candidate, first cited text, end) in `texts`
    for k in loose:
        read = [m.text for m in read_for(candidates[k].seqs, messages(sessions.get(owners[k], [])))]
        spans.append((k, len(texts) + 1, len(texts) + 1 + len(read)))
        texts += [candidates[k].text, *read]
    vectors = np.asarray(rt.embedder.embed(texts), dtype=np.float64)
    for k, start, end in spans:
        out[k] = float(np.max(vectors[start:end] @ vectors[start - 1]))
    return out
