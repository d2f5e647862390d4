"""Grounded, or not stored: each candidate of an extraction call checked against the lines of
its session the call showed (`core.grounding`), and, when only its wording is its own, against
them in embedding space. A candidate that fails carries its reason (`Candidate.ungrounded`): the
pass records it as rejected and never plans or stores it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from sqlalchemy import func, or_
from sqlmodel import col, select

from dreamer.core.models import CURRENT_STATUSES, Memory
from dreamer.core.trust.grounding import Message, Verdict, check, read_for, settle
from dreamer.core.trust.prompt_copy import Prompt
from dreamer.engine.extraction.extract import EXTRACTION_CARDS, Candidate
from dreamer.engine.extraction.transcript import Line
from dreamer.engine.runtime import Runtime
from dreamer.llm.cards import CARDS, card_text, describe_schema
from dreamer.store.db import session_scope

REMEMBERED = 200  # most memories read to find the names a candidate's session never gave
Shared = tuple[int, Candidate]  # a candidate given to one session (its index), with that session's own seqs


@lru_cache(maxsize=1)
def prompt_texts() -> tuple[str, ...]:
    """What a model is prompted with, as a candidate must not copy it: every card whole (rubric,
    worked examples, the transcript instructions it includes) and the extraction answers' field
    descriptions."""
    return (*(card_text(name) for name in CARDS), *(describe_schema(schema) for _, schema in EXTRACTION_CARDS.values()))


@lru_cache(maxsize=1)
def the_prompt() -> Prompt:
    return Prompt.of(prompt_texts())


def ground(rt: Runtime, user_id: str, shared: list[Shared], sessions: dict[int, list[Line]]) -> list[Shared]:
    """Each shared candidate with its verdict: `ungrounded` holds why it is not grounded, None
    when it is. `sessions`: each session's lines the call showed, numbered with its own seqs. A
    candidate naming what the session never gave is checked again with the user's current
    memories that hold those names (an update names what it updates)."""
    verdicts = [_verdict(cand, sessions.get(i, [])) for i, cand in shared]
    unsaid = sorted({w for v in verdicts for w in v.unsaid})
    if unsaid:
        known = remembered(rt, user_id, unsaid)
        verdicts = [
            _verdict(cand, sessions.get(i, []), [*known, *said_elsewhere(sessions, i)]) if v.unsaid else v
            for (i, cand), v in zip(shared, verdicts)
        ]
    similar = _similarities(rt, [cand for _, cand in shared], verdicts, sessions, [i for i, _ in shared])
    threshold = rt.settings.grounding_min_similarity
    settled = [settle(v, s, threshold) for v, s in zip(verdicts, similar)]
    return [(i, cand.model_copy(update={"ungrounded": v.reason})) for (i, cand), v in zip(shared, settled)]


def messages(lines: Sequence[Line]) -> list[Message]:
    """A session's shown lines as grounding reads them."""
    return [Message(ln.seq, ln.text, ln.day, ln.context_only) for ln in lines]


def _verdict(cand: Candidate, lines: list[Line], known: Sequence[str] = ()) -> Verdict:
    speakers = sorted({ln.name for ln in lines if ln.name})
    return check(cand.text, cand.seqs, messages(lines), speakers=speakers, prompt=the_prompt(), known=known)


def said_elsewhere(sessions: dict[int, list[Line]], own: int) -> list[str]:
    """What the user's other sessions in the same call said: a name one of them gave (the
    company named last week) is no more invented than one the user's memories hold, though the
    pass has not stored that session's memories yet."""
    return [ln.text for i, lines in sessions.items() if i != own for ln in lines]


def remembered(rt: Runtime, user_id: str, words: list[str]) -> list[str]:
    """The texts of the user's current memories that hold any of `words` (case ignored), at most
    `REMEMBERED` of them."""
    probes = [func.lower(Memory.text).like(f"%{_escaped(_base(w))}%", escape="\\") for w in words]
    with session_scope(rt.engine) as s:
        current = col(Memory.user_id) == user_id, col(Memory.status).in_(CURRENT_STATUSES)
        return list(s.exec(select(Memory.text).where(*current, or_(*probes)).limit(REMEMBERED)).all())


def _base(word: str) -> str:
    """A name as a memory may hold it: without a possessive ("Tallyhub's" is found in
    "backend lead at Tallyhub"), case folded."""
    return re.split(r"['\u2019]", word.casefold(), maxsplit=1)[0] or word.casefold()


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
