"""Experience from the dream pass in code mode. For a code session with a project, each
extraction call shows the project's known lessons most related to its chunk (`known_lessons`);
once the session's memories are stored, each item that shows a known lesson failing becomes a
counterexample of it, and each other item a candidate entry (`propose_entries`). What the pass
refused (ungrounded, untrusted or steering, holding a secret, rejected) never becomes an entry.
Agent mode and sessions without a project are left as they are."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

from dreamer.core.code_work.experience import InvalidExperience
from dreamer.core.consolidate import content_hash
from dreamer.core.errors import NotFound
from dreamer.core.models import CODE_KINDS, Session
from dreamer.core.tokens import count_tokens
from dreamer.core.trust.memory_text import as_data, normalise, stored_text
from dreamer.core.trust.steering import steering_markers
from dreamer.engine.code_work.book import CodeBook, EntryInput
from dreamer.engine.code_work.search import search
from dreamer.engine.consolidation.plan import Planned
from dreamer.engine.extraction.extract import MIN_TRANSCRIPT, Candidate, Extractor, LLMExtractor
from dreamer.engine.extraction.transcript import Chunk, Lesson, render_lessons
from dreamer.engine.load import Work
from dreamer.engine.runtime import Runtime
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where

log = logging.getLogger(__name__)

BRANCH = "main"  # a session names no branch: its entries are the project's main branch's
LESSONS_SHOWN = 5  # known lessons shown beside a chunk, at most
LESSON_TOKENS = 256  # of the model's window kept for them
LESSON_CHARS = 240  # of one lesson's text, at most
REDACTED = "[REDACTED:"  # what a redacted secret leaves in a candidate's text


def where_of(sess: Session) -> Where | None:
    """The project and branch a code session's experience belongs to; None for agent mode or
    a session without a project."""
    if sess.mode != "code" or not sess.project:
        return None
    return Where(sess.user_id, sess.project, BRANCH)


def code_book(rt: Runtime) -> CodeBook:
    return CodeBook(rt.engine, depth=rt.settings.experience_propagation_depth)


def budgets(sess: Session, extractor: Extractor, wanted: int) -> tuple[int, int]:
    """The transcript tokens a chunk of `sess`'s group may carry, and the tokens its known lessons
    may take beside it: `LESSON_TOKENS` for a model's call on a code session with a project,
    when the window still holds `MIN_TRANSCRIPT` of transcript with them, else none."""
    if not isinstance(extractor, LLMExtractor):
        return wanted, 0  # the rules read no lessons
    if where_of(sess) is None:
        return extractor.chunk_tokens(sess.mode, wanted), 0
    room = extractor.chunk_tokens(sess.mode, sys.maxsize)
    lessons = LESSON_TOKENS if room - LESSON_TOKENS >= MIN_TRANSCRIPT else 0
    return min(wanted, room - lessons), lessons


def known_lessons(rt: Runtime, sess: Session, chunk: Chunk, tokens: int) -> tuple[Lesson, ...]:
    """The current entries of the session's project most related to the chunk's new lines (the
    task-start search: exact identifiers, then words, then status), at most `LESSONS_SHOWN` and
    `tokens` as rendered; an entry whose text steers is never shown."""
    where = where_of(sess)
    query = " ".join(ln.text for ln in chunk.lines if not ln.context_only)
    if where is None or tokens <= 0 or not query.strip():
        return ()
    found = search(code_book(rt), where, query, limit=2 * LESSONS_SHOWN)["entries"]
    with session_scope(rt.engine) as s:
        trusted = {e.id for e in rows.entries(s, where) if not e.untrusted}
    lessons: list[Lesson] = []
    for item in found:
        if item["id"] not in trusted:
            continue
        lesson = Lesson(item["id"], _lesson_text(item["text"], item["conditions"]))
        if len(lessons) == LESSONS_SHOWN or count_tokens(render_lessons([*lessons, lesson])) > tokens:
            break
        lessons.append(lesson)
    return tuple(lessons)


def _lesson_text(text: str, conditions: list[str]) -> str:
    shown = as_data(text)
    shown = shown if len(shown) <= LESSON_CHARS else shown[: LESSON_CHARS - 3].rstrip() + "..."
    return f"{shown} (holds when: {'; '.join(as_data(c) for c in conditions)})" if conditions else shown


@dataclass
class Proposed:
    """What a session's items did to its project's experience."""

    added: int = 0  # candidate entries
    countered: int = 0  # counterexamples linked to known entries


def propose_entries(rt: Runtime, work: Work, planned: list[Planned], outcomes: list[str] | None) -> Proposed:
    """Once a code session's memories are stored (`outcomes`, one per planned candidate; None:
    its result was dropped), each of its kept items that counters a known lesson is linked to
    that entry as a counterexample (once); each other one (or one whose lesson is gone) becomes
    a candidate entry of its project (its session as the source task) unless one with the same
    normalised text is there."""
    done = Proposed()
    where = where_of(work.session)
    if where is None or outcomes is None:
        return done
    kept = [p.candidate for p, outcome in zip(planned, outcomes) if outcome != "rejected"]
    items = [c for c in kept if c.kind in CODE_KINDS and _trusted(c)]
    if not items:
        return done
    try:
        _propose(code_book(rt), where, work.session, items, done)
    except Exception:  # the memories are stored and the cursor moved: the pass goes on without them
        log.exception("session %s: experience entries not proposed", work.session.id)
    if done.added or done.countered:
        log.info("session %s: %d candidate entries, %d counterexamples", work.session.id, done.added, done.countered)
    return done


def _propose(book: CodeBook, where: Where, sess: Session, items: list[Candidate], done: Proposed) -> None:
    task = sess.external_id
    with session_scope(book.engine) as s:
        known = {content_hash(e.text) for e in rows.entries(s, where)}
    for cand in items:
        linked = _counter(book, where, cand, task) if cand.counters else NO_LESSON
        done.countered += linked == LINKED
        if linked == NO_LESSON and (digest := content_hash(cand.text)) not in known:  # a finding of its own
            known.add(digest)
            book.add_entry(where, _entry(sess, cand))
            done.added += 1


def _trusted(cand: Candidate) -> bool:
    """Whether the pass let the candidate stand as it was said: grounded, not steering or
    untrusted, and holding no secret, in its text or its conditions (the model's own words)."""
    said = [cand.text, *cand.conditions]
    clean = all(REDACTED not in t and stored_text(t) == normalise(t) for t in said)
    return cand.ungrounded is None and not cand.untrusted and clean and not steering_markers(" ".join(said))


def _entry(sess: Session, cand: Candidate) -> EntryInput:
    return EntryInput(
        text=cand.text,
        task=sess.external_id,
        basis=cand.basis or "inferred",
        origin="agent",
        conditions=list(cand.conditions),
        evidence=[{"session_id": sess.id, "external_id": sess.external_id, "seqs": cand.seqs}],
    )


LINKED, HELD, NO_LESSON = "linked", "held", "no lesson"


def _counter(book: CodeBook, where: Where, cand: Candidate, task: str) -> str:
    """Link the candidate to the entry it counters, once: `LINKED`; `HELD` when that entry holds
    this counterexample already; `NO_LESSON` when it names none, or one gone or of another project."""
    entry_id = cand.counters or ""
    with session_scope(book.engine) as s:
        try:
            e = rows.entry(s, where.user_id, entry_id)
        except NotFound:
            return NO_LESSON
        if (e.project, e.branch) != (where.project, where.branch):
            return NO_LESSON
        if content_hash(cand.text) in {content_hash(c) for c in e.counterexamples}:
            return HELD
    try:
        book.counterexample(where.user_id, entry_id, cand.text, task=task)
    except (NotFound, InvalidExperience):
        return NO_LESSON
    return LINKED
