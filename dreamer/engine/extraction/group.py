"""Extraction for a group of sessions: their lines numbered on as one transcript and packed into
shared calls; a shared call that fails made again for each session alone; each session's
candidates collapsed and capped."""

from __future__ import annotations

from dataclasses import replace
from enum import Enum
from typing import TypeAlias, TypeGuard

from dreamer.core.errors import BudgetExceeded, CircuitOpen
from dreamer.core.models import Session
from dreamer.core.settings import Settings
from dreamer.engine.code_work.dream import budgets, known_lessons
from dreamer.engine.extraction.extract import Candidate, Extractor, ExtractResult, LLMExtractor, collapse_duplicates
from dreamer.engine.extraction.grounding import Shared, ground
from dreamer.engine.extraction.transcript import Chunk, Line, chunk_lines
from dreamer.engine.extraction.untrusted import mark_untrusted
from dreamer.engine.failures import is_global
from dreamer.engine.load import Work, session_id
from dreamer.engine.pace import Pace, lease_lost
from dreamer.engine.rules.extractor import worth_a_call
from dreamer.engine.runtime import Runtime
from dreamer.store import leases


class Cut(Enum):
    """A session cut short because the pass was halted (asked to stop, or the agent busy)."""

    HALTED = "halted"


class _Again(Enum):
    """A session whose shared call failed: extract it again, alone."""

    ALONE = "alone"


STOPS = (CircuitOpen, BudgetExceeded)
Stop: TypeAlias = CircuitOpen | BudgetExceeded | Cut  # what cuts the sessions still in play short
Found: TypeAlias = list[Candidate] | Exception | Cut | _Again  # a session's extraction under way
Capped: TypeAlias = tuple[list[Candidate], list[Candidate]]  # the best candidates, and those left out
Extracted: TypeAlias = Capped | Exception | Cut  # a session's extraction, done
Where: TypeAlias = dict[int, tuple[int, int]]  # a line's number -> (index of its session, its own seq)


def extract_group(
    rt: Runtime,
    works: list[Work],
    extractor: Extractor,
    held: dict[int, leases.HeldLease],
    pace: Pace,
) -> list[Extracted]:
    """Each session's candidates (a statement repeated in several messages is one candidate),
    the best `entries_per_session` of them and those over the cap; or the error that stopped its
    extraction. The sessions' lines are numbered on from one another (`number_lines`) and packed
    into chunks of `chunk_tokens`, so short sessions share a call. A call carrying several
    sessions that fails is made again for each of them alone, so one session the model cannot
    answer fails only itself (a dead endpoint opens the breaker instead). A statement resting on
    lines of two sessions is a candidate of each: consolidation merges the second into the first."""
    results = _extract_packed(rt, works, extractor, held, pace)
    stop = next((r for r in results if _is_stop(r)), None)
    for i, result in enumerate(results):
        if result is _Again.ALONE:  # after a stop, not asked again: it is cut short like those after it
            if stop is None and pace.halted():
                stop = Cut.HALTED
            again = stop or _extract_packed(rt, [works[i]], extractor, held, pace)[0]
            results[i] = again
            stop = stop or (again if _is_stop(again) else None)
    # A stop (breaker, budget, or the pass halted) leaves the sessions it cut short holding it;
    # the caller applies the sessions before the first of them, then stops the pass.
    return [_settled(rt.settings, r) for r in results]


def _is_stop(result: Found) -> TypeGuard[Stop]:
    return result is Cut.HALTED or isinstance(result, STOPS)


def _settled(st: Settings, result: Found) -> Extracted:
    """A session's candidates capped, or what stopped it (none is left to go alone: each went)."""
    if isinstance(result, list):
        return _capped(st, result)
    assert result is not _Again.ALONE
    return result


def _extract_packed(
    rt: Runtime,
    works: list[Work],
    extractor: Extractor,
    held: dict[int, leases.HeldLease],
    pace: Pace,
) -> list[Found]:
    """Per session: the candidates found, the error that stopped it, `_Again.ALONE` or `Cut.HALTED`.
    Every lease involved is kept alive before each call, and the pass asked whether it is halted
    before each call but the first. A stop (breaker, budget, halted) ends the loop: the sessions
    with lines still to send get it, those already sent whole keep what was found."""
    st = rt.settings
    mode = works[0].session.mode
    lines, where = number_lines([w.lines for w in works])
    found: list[Found] = [[] for _ in works]
    budget, lesson_tokens = budgets(works[0].session, extractor, st.chunk_tokens)
    chunks = chunk_lines(lines, budget)
    openings = _openings(lines, where)
    last = {where[ln.seq][0]: c for c, packed in enumerate(chunks) for ln in packed.lines if not ln.context_only}
    calls = 0
    for c, packed in enumerate(chunks):
        pace.run_lease.keep_alive()
        for i, work in enumerate(works):  # every session still in play, not only those in this call
            if isinstance(found[i], list):
                found[i] = lease_lost(held[session_id(work.session)]) or found[i]
        carried = [
            i
            for i in sorted({where[ln.seq][0] for ln in packed.lines if not ln.context_only})
            if isinstance(found[i], list)
        ]  # not those that failed, went alone or were lost
        chunk = replace(packed, lines=_shown(packed, carried, where, openings), sessions=len(carried))
        if not carried or (st.triage and isinstance(extractor, LLMExtractor) and not worth_a_call(chunk, mode)):
            continue
        if calls and pace.halted():
            return _cut_short(found, last, c, Cut.HALTED)
        calls += 1
        try:
            lessons = known_lessons(rt, works[0].session, chunk, lesson_tokens)
            result = extractor.extract(replace(chunk, lessons=lessons), mode)
        except STOPS as exc:
            return _cut_short(found, last, c, exc)
        except Exception as exc:  # the model's, or one of the sessions' own (`is_global`: the pass's)
            if is_global(exc):
                raise
            for i in carried:
                found[i] = _Again.ALONE if len(carried) > 1 else exc
            continue
        _share(rt, found, result, (chunk, carried, works[0].session), where)
    return found


def _share(
    rt: Runtime, found: list[Found], result: ExtractResult, call: tuple[Chunk, list[int], Session], where: Where
) -> None:
    """Each candidate of a call to every session still in play whose lines it rests on, with
    that session's own seqs; marked untrusted as judged on all the lines it cites, and
    ungrounded (`grounding.ground`) as checked on the lines of that session the call showed. One
    citing no line shown goes to the first session the call carried, to be rejected there."""
    chunk, carried, owner = call  # the chunk shown, the sessions it carried, the group's first (its owner and mode)
    mode = owner.mode
    shared: list[Shared] = [(carried[0], c.model_copy(update={"seqs": []})) for c in result.unanchored]
    for cand in mark_untrusted(result.candidates, chunk.lines, mode):
        for i, seqs in split_seqs(cand.seqs, where).items():
            if isinstance(found[i], list):
                shared.append((i, cand.model_copy(update={"seqs": seqs})))
    sessions: dict[int, list[Line]] = {}
    for ln in chunk.lines:
        i, seq = where[ln.seq]
        sessions.setdefault(i, []).append(replace(ln, seq=seq))
    for i, cand in ground(rt, owner.user_id, shared, sessions):
        if isinstance(kept := found[i], list):
            kept.append(cand)


def _cut_short(found: list[Found], last: dict[int, int], c: int, why: Stop) -> list[Found]:
    """`found` with `why` for each session still in play that has lines in chunk `c` or later."""
    return [why if isinstance(f, list) and last.get(i, -1) >= c else f for i, f in enumerate(found)]


def _openings(lines: list[Line], where: Where) -> dict[int, list[Line]]:
    """The number of each session's first new line -> its context lines (the overlap before its cursor)."""
    out: dict[int, list[Line]] = {}
    context: dict[int, list[Line]] = {}
    opened: set[int] = set()
    for ln in lines:
        i = where[ln.seq][0]
        if ln.context_only:
            context.setdefault(i, []).append(ln)
        elif i not in opened:
            opened.add(i)
            out[ln.seq] = context.get(i, [])
    return out


def _shown(
    packed: Chunk,
    carried: list[int],
    where: Where,
    openings: dict[int, list[Line]],
) -> list[Line]:
    """The chunk's lines of the `carried` sessions; a session's first new line keeps its context
    lines in front of it, also when the chunk before took them."""
    have = {ln.seq for ln in packed.lines}
    out: list[Line] = []
    for ln in packed.lines:
        if where[ln.seq][0] in carried:
            out += [o for o in openings.get(ln.seq, []) if o.seq not in have]
            out.append(ln)
    return out


def _capped(st: Settings, found: list[Candidate]) -> Capped:
    """One candidate per statement (untrusted if any call found it so, ungrounded if every call
    did), then the best `entries_per_session` of the grounded ones; and those left out: the
    ungrounded, then the rest over the cap."""
    found = collapse_duplicates(found)
    grounded = [c for c in found if c.ungrounded is None]
    ranked = [c for _, c in sorted(enumerate(grounded), key=lambda p: (-p[1].importance, p[0]))]
    ungrounded = [c for c in found if c.ungrounded is not None]
    return ranked[: st.entries_per_session], ungrounded + ranked[st.entries_per_session :]


def number_lines(sessions: list[list[Line]]) -> tuple[list[Line], Where]:
    """The sessions' lines as one transcript, numbered on: the first session keeps its own seqs,
    each next one starts after the last number used. Returns the lines and, for each number,
    (index of its session, its own seq)."""
    out: list[Line] = []
    where: Where = {}
    offset = 0
    for i, lines in enumerate(sessions):
        if i and lines:
            offset = max(where) + 1 - lines[0].seq
        for ln in lines:
            where[ln.seq + offset] = (i, ln.seq)
            out.append(replace(ln, seq=ln.seq + offset))
    return out, where


def split_seqs(numbers: list[int], where: Where) -> dict[int, list[int]]:
    """A candidate's line numbers as its sessions' own seqs, by session index (unknown numbers dropped)."""
    out: dict[int, list[int]] = {}
    for n in sorted(set(numbers)):
        if n in where:
            i, seq = where[n]
            out.setdefault(i, []).append(seq)
    return out
