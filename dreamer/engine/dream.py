"""The dream pass: due sessions -> new messages -> extraction -> consolidation -> one
transaction per session (memories, history, cursor) -> index via the outbox -> Markdown."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta, tzinfo

import numpy as np
from sqlmodel import select

from dreamer.core.consolidate import (
    JUDGE_SYSTEM,
    Decision,
    Judgements,
    JudgeRequest,
    Neighbour,
    Thresholds,
    content_hash,
    decide,
    resolve,
    token_similarity,
    verdicts_by_pair,
)
from dreamer.core.days import local_day
from dreamer.core.errors import BudgetExceeded, CircuitOpen, EndpointUnusable, LeaseLost, LLMError, LLMTimeout
from dreamer.core.models import CURRENT_STATUSES, Cursor, DreamRun, Lease, Memory, Message, Session, utcnow
from dreamer.core.redact import clean_for_model, clean_prefix
from dreamer.core.scope import Scope
from dreamer.core.tokens import count_tokens
from dreamer.engine import outbox
from dreamer.engine.due import DueRules, due_sessions, session_groups
from dreamer.engine.extract import (
    Candidate,
    Chunk,
    Extractor,
    Line,
    LLMExtractor,
    RulesExtractor,
    chunk_lines,
    collapse_duplicates,
    mark_untrusted,
    worth_a_call,
)
from dreamer.index.base import SearchFilter
from dreamer.llm.client import GuardedLLM, endpoint_answers
from dreamer.store import cabinet, leases
from dreamer.store.busy import busy_or_unreachable
from dreamer.store.db import session_scope
from dreamer.store.user_locks import UserLocked

log = logging.getLogger(__name__)
BECAME_BUSY = "the agent became busy"  # how a run row says the pass stopped for a busy agent
LOCKED_OUT = "left due: another writer kept their user's consolidation lock"  # and sessions it left for that

LOAD_BATCH = 256  # messages fetched at a time while a session's new messages are read


@dataclass
class Work:
    """One session's slice for this pass."""

    session: Session
    processed_seq: int
    lines: list[Line]
    upto: int  # the cursor after this pass
    new_messages: int


@dataclass
class Planned:
    candidate: Candidate
    decision: Decision
    memory_id: str | None = None  # the memory this candidate added or merged into, once applied


@dataclass
class Tally:
    candidates: int = 0
    added: int = 0
    merged: int = 0
    superseded: int = 0
    rejected: list[dict] = field(default_factory=list)
    locked_out: int = 0  # sessions left due: another writer kept their user's consolidation lock
    locked_users: set[str] = field(
        default_factory=set
    )  # whose lock was kept: their later sessions wait for the next pass
    timed_out: list[TimedOut] = field(default_factory=list)  # counted at the end if the endpoint answered after them


@dataclass(frozen=True)
class TimedOut:
    """A session whose model call timed out: the failure as its cursor recorded it (to count it
    only if the cursor still holds it), and how many calls the endpoint had answered by then."""

    session_id: int
    recorded: tuple[int, str]  # the cursor's attempts and last error after the failure
    answered: int


def dream_pass(
    rt,
    *,
    trigger: str = "manual",
    session_ids: list[int] | None = None,
    user_id: str | None = None,
    force: bool = False,
    busy_checked: bool = False,
    now: datetime | None = None,
    stop=None,
) -> DreamRun:
    """Run one pass and return its `dream_runs` row. `stop()` is asked between sessions, and
    (unless `force`) whether the agent is busy: at the start, unless the caller has just found
    it idle at `now` (`busy_checked`), and between sessions."""
    started = utcnow()
    now = now or started
    if not (force or busy_checked) and (reason := rt.busy.busy_reason(now)):
        return _finish_skipped(rt, trigger, reason)
    leases.sweep_abandoned_runs(rt.engine)
    llm = _guarded(rt)
    extractor = _extractor(rt, llm)
    run = _start_run(rt, trigger, extractor.name)
    lease = leases.RunLease(rt.engine, run.id, _owner(run), rt.settings.lease_seconds)  # type: ignore[arg-type]
    tally = Tally()
    try:
        outbox.drain(rt)
        with session_scope(rt.engine) as s:
            due = due_sessions(s, DueRules.from_settings(rt.settings), now, session_ids=session_ids, user_id=user_id)
        pace = Pace(lambda: _halted(rt, run, stop, None if force else now + (utcnow() - started)), lease)
        for group in session_groups([sess for sess, _cursor in due], rt.settings.sessions_per_call):
            if pace.halted():
                break
            if group[0].user_id in tally.locked_users:  # not extracted only to wait for the lock again
                tally.locked_out += len(group)
                continue
            lease.keep_alive()
            try:
                if _session_group(rt, group, extractor, llm, run, tally, pace):
                    break
            except (CircuitOpen, BudgetExceeded) as exc:
                run.status, run.error = "stopped", str(exc)
                break
        lease.keep_alive()
        _count_timeouts(rt, llm, tally.timed_out, may_probe=run.status == "running" and not run.error)
        outbox.drain(rt)  # and every due view rendered, once per user
    except BaseException as exc:
        run.status, run.error = "failed", f"{type(exc).__name__}: {exc}"
        _save_run(rt, run, tally, llm)
        raise
    if tally.locked_out:
        run.error = "; ".join(filter(None, [run.error, f"{tally.locked_out} session(s) {LOCKED_OUT}"]))
    if run.status == "running":
        run.status = "ok" if not (run.failed_sessions or tally.locked_out) else "partial"
    return _save_run(rt, run, tally, llm)


# --------------------------------------------------------------------------- a group of sessions


def _halted(rt, run: DreamRun, stop, busy_at: datetime | None) -> bool:
    """Whether the pass stops before its next session: `stop()` asks it to, or (unless forced,
    `busy_at` None) the agent is busy at `busy_at`. Says why on the run row."""
    if stop is not None and stop():
        run.error = "stopped on request"
        return True
    if busy_at is not None and (reason := busy_or_unreachable(rt.busy, busy_at)):
        run.status, run.error = "stopped", f"{BECAME_BUSY}: {reason}"
        return True
    return False


def locked_out(run: DreamRun) -> bool:
    """Whether the pass left sessions due because another writer kept their user's lock."""
    return run.status == "partial" and (run.error or "").endswith(LOCKED_OUT)


def stopped_busy(run: DreamRun) -> bool:
    """Whether the pass stopped before its last session because the agent became busy."""
    return run.status == "stopped" and (run.error or "").startswith(BECAME_BUSY)


@dataclass(frozen=True)
class Pace:
    """What a group of sessions asks between its steps: whether to stop before the next session
    (`halted`), and the pass's run lease to keep alive."""

    halted: Callable[[], bool]
    run_lease: leases.HeldLease


def _session_group(
    rt,
    group: list[Session],
    extractor: Extractor,
    llm,
    run: DreamRun,
    tally: Tally,
    pace: Pace,
) -> bool:
    """Consecutive sessions of one owner: their new messages extracted together (short sessions
    share calls), then each session planned, applied and indexed in turn, so a later session's
    neighbours include what an earlier one added. Each session is leased for the whole group.
    True when the pass was halted between two of its sessions (the rest keep their cursors)."""
    owner = _owner(run)
    held: dict[int, leases.HeldLease] = {}
    try:
        works = [w for w in (_lease_and_load(rt, sess, owner, held) for sess in group) if w is not None]
        if not works:
            return False
        for k, (work, found) in enumerate(zip(works, _extract_group(rt, works, extractor, held, pace))):
            if isinstance(found, _STOPS):
                raise found  # cut short: it and every later session keep their cursors
            if found is _HALTED or (k and pace.halted()):
                return True
            pace.run_lease.keep_alive()
            _finish_session(rt, work, found, llm, run, tally, held[work.session.id])
        return False
    finally:
        for lease in held.values():
            leases.release(rt.engine, lease.name, owner)


def _lease_and_load(rt, sess: Session, owner: str, held: dict[int, leases.HeldLease]) -> Work | None:
    name = leases.session_lease(sess.id)
    if not leases.acquire(rt.engine, name, owner, rt.settings.lease_seconds):
        log.info("session %s is leased by another worker; skipped", sess.id)
        return None
    held[sess.id] = leases.HeldLease(rt.engine, name, owner, rt.settings.lease_seconds)
    return _load_work(rt, sess)


def _finish_session(rt, work: Work, found, llm, run: DreamRun, tally: Tally, held: leases.HeldLease) -> None:
    """Plan and apply one session's extraction (`found`: its candidates and those over the cap,
    or the error that stopped its extraction), holding its user's consolidation lock from the
    plan until the result is in the index (`user_locks`)."""
    sess = work.session
    if isinstance(found, Exception):
        _failed(rt, sess, found, run, tally, llm)
        return
    candidates, over_cap = found
    if sess.user_id in tally.locked_users:  # an earlier session of the group waited for it already
        tally.locked_out += 1
        return
    try:
        with rt.user_locks.hold(sess.user_id) as lock:
            try:
                _still_held(held)
                planned = _plan(rt, work, candidates, llm)
                lock.confirm()  # a lock that ran out while planning may have let another writer in
            except (LeaseLost, LLMError) as exc:
                _failed(rt, sess, exc, run, tally, llm)
                return
            _apply(rt, work, planned, run, tally)
            outbox.drain(rt, render=False)  # the next session's neighbours include what this one added;
            # its Markdown is rendered once, by the drain at the end of the pass
    except UserLocked as exc:  # nothing applied: the session keeps its cursor, the pass goes on
        log.warning("session %s and its user's later sessions left for a later pass: %s", sess.id, exc)
        tally.locked_out += 1
        tally.locked_users.add(sess.user_id)
        return
    tally.rejected += [{"session_id": sess.id, "text": c.text, "reason": "over the per-session cap"} for c in over_cap]
    run.sessions += 1
    run.messages += work.new_messages


def _failed(rt, sess: Session, exc: Exception, run: DreamRun, tally: Tally, llm) -> None:
    """A session whose lease was lost is dropped; one the model failed on is recorded failed.
    The breaker and the budget stop the whole pass."""
    if isinstance(exc, LeaseLost):
        log.warning(
            "session %s: its lease expired and another worker took it; this worker's work on it is dropped", sess.id
        )
        return
    if isinstance(exc, (CircuitOpen, BudgetExceeded)) or not isinstance(exc, LLMError):
        raise exc
    recorded = _record_failure(rt, sess.id, f"{type(exc).__name__}: {exc}", counted=counts_as_its_own(exc))
    if isinstance(exc, LLMTimeout) and recorded is not None and llm is not None:
        tally.timed_out.append(TimedOut(sess.id, recorded, llm.answered))
    run.failed_sessions += 1


def _load_work(rt, sess: Session) -> Work | None:
    """New messages after the cursor (plus a little overlap), up to the per-pass token budget."""
    st = rt.settings
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, sess.id)
        if cursor is None or cursor.processed_seq >= sess.last_seq or cursor.status == "quarantined":
            return None
        start = max(1, cursor.processed_seq - st.overlap_messages + 1)
        rows = s.exec(  # streamed: a long session is read only as far as the budget goes
            select(Message)
            .where(Message.session_id == sess.id)
            .where(Message.seq >= start)
            .order_by(Message.seq)
            .execution_options(yield_per=LOAD_BATCH)
        )
        lines, upto, new, spent, tz = [], cursor.processed_seq, 0, 0, st.tz
        for m in rows:
            line = _line(m, cursor.processed_seq, st.tool_result_chars, tz)
            cost = count_tokens(line.text)
            if not line.context_only and new and spent + cost > st.tokens_per_session_pass:
                break
            lines.append(line)
            if not line.context_only:
                spent, new, upto = spent + cost, new + 1, m.seq
        processed = cursor.processed_seq
    return Work(sess, processed, lines, upto, new) if new else None


def _line(m: Message, processed_seq: int, tool_chars: int, tz: tzinfo) -> Line:
    text = clean_prefix(m.content, tool_chars) if m.role == "tool" else clean_for_model(m.content)
    return Line(m.seq, m.role, m.name, text, context_only=m.seq <= processed_seq, day=local_day(m.created_at, tz))


def _still_held(held: leases.HeldLease) -> None:
    if (lost := _lost(held)) is not None:
        raise lost


def _extract_group(
    rt,
    works: list[Work],
    extractor: Extractor,
    held: dict[int, leases.HeldLease],
    pace: Pace,
) -> list:
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
        if result is _ALONE:  # after a stop, not asked again: it is cut short like those after it
            if stop is None and pace.halted():
                stop = _HALTED
            results[i] = stop or _extract_packed(rt, [works[i]], extractor, held, pace)[0]
            stop = stop or (results[i] if _is_stop(results[i]) else None)
    # A stop (breaker, budget, or the pass halted) leaves the sessions it cut short holding it;
    # the caller applies the sessions before the first of them, then stops the pass.
    return [_capped(rt.settings, r) if isinstance(r, list) else r for r in results]


_STOPS = (CircuitOpen, BudgetExceeded)
_HALTED = object()  # a session cut short because the pass was halted (asked to stop, or the agent busy)
_ALONE = object()  # a session whose shared call failed: extract it again, alone


def _is_stop(result) -> bool:
    return result is _HALTED or isinstance(result, _STOPS)


def _extract_packed(
    rt,
    works: list[Work],
    extractor: Extractor,
    held: dict[int, leases.HeldLease],
    pace: Pace,
) -> list:
    """Per session: the candidates found, the error that stopped it, `_ALONE` or `_HALTED`.
    Every lease involved is kept alive before each call, and the pass asked whether it is halted
    before each call but the first. A stop (breaker, budget, halted) ends the loop: the sessions
    with lines still to send get it, those already sent whole keep what was found."""
    st = rt.settings
    mode = works[0].session.mode
    lines, where = number_lines([w.lines for w in works])
    found: list = [[] for _ in works]
    chunks = chunk_lines(lines, st.chunk_tokens)
    openings = _openings(lines, where)
    last = {where[ln.seq][0]: c for c, packed in enumerate(chunks) for ln in packed.lines if not ln.context_only}
    calls = 0
    for c, packed in enumerate(chunks):
        pace.run_lease.keep_alive()
        for i, work in enumerate(works):  # every session still in play, not only those in this call
            if isinstance(found[i], list):
                found[i] = _lost(held[work.session.id]) or found[i]
        carried = [
            i
            for i in sorted({where[ln.seq][0] for ln in packed.lines if not ln.context_only})
            if isinstance(found[i], list)
        ]  # not those that failed, went alone or were lost
        chunk = replace(packed, lines=_shown(packed, carried, where, openings), sessions=len(carried))
        if not carried or (st.triage and isinstance(extractor, LLMExtractor) and not worth_a_call(chunk, mode)):
            continue
        if calls and pace.halted():
            return _cut_short(found, last, c, _HALTED)
        calls += 1
        try:
            result = extractor.extract(chunk, mode)
        except _STOPS as exc:
            return _cut_short(found, last, c, exc)
        except LLMError as exc:
            for i in carried:
                found[i] = _ALONE if len(carried) > 1 else exc
            continue
        for cand in mark_untrusted(result.candidates, chunk.lines, mode):  # judged on all it cites
            for i, seqs in split_seqs(cand.seqs, where).items():
                if isinstance(found[i], list):
                    found[i].append(cand.model_copy(update={"seqs": seqs}))
    return found


def _cut_short(found: list, last: dict[int, int], c: int, why) -> list:
    """`found` with `why` for each session still in play that has lines in chunk `c` or later."""
    return [why if isinstance(f, list) and last.get(i, -1) >= c else f for i, f in enumerate(found)]


def _lost(held: leases.HeldLease) -> LeaseLost | None:
    """The lease renewed (when due), or the error saying another worker holds it now."""
    return None if held.keep_alive() else LeaseLost(f"lease {held.name} is held by another worker")


def _openings(lines: list[Line], where: dict[int, tuple[int, int]]) -> dict[int, list[Line]]:
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
    where: dict[int, tuple[int, int]],
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


def _capped(st, found: list[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """One candidate per statement (untrusted if any call found it so), then the best
    `entries_per_session` and the rest."""
    found = collapse_duplicates(found)
    ranked = [c for _, c in sorted(enumerate(found), key=lambda p: (-p[1].importance, p[0]))]
    return ranked[: st.entries_per_session], ranked[st.entries_per_session :]


def number_lines(sessions: list[list[Line]]) -> tuple[list[Line], dict[int, tuple[int, int]]]:
    """The sessions' lines as one transcript, numbered on: the first session keeps its own seqs,
    each next one starts after the last number used. Returns the lines and, for each number,
    (index of its session, its own seq)."""
    out: list[Line] = []
    where: dict[int, tuple[int, int]] = {}
    offset = 0
    for i, lines in enumerate(sessions):
        if i and lines:
            offset = max(where) + 1 - lines[0].seq
        for ln in lines:
            where[ln.seq + offset] = (i, ln.seq)
            out.append(replace(ln, seq=ln.seq + offset))
    return out, where


def split_seqs(numbers: list[int], where: dict[int, tuple[int, int]]) -> dict[int, list[int]]:
    """A candidate's line numbers as its sessions' own seqs, by session index (unknown numbers dropped)."""
    out: dict[int, list[int]] = {}
    for n in sorted(set(numbers)):
        if n in where:
            i, seq = where[n]
            out.setdefault(i, []).append(seq)
    return out


# --------------------------------------------------------------------------- consolidation


def _scope(sess: Session) -> Scope:
    """The session's owner: what is learned from it belongs to exactly this scope."""
    return Scope(user_id=sess.user_id, agent_id=sess.agent_id, project=sess.project, team=sess.team)


def _plan(rt, work: Work, candidates: list[Candidate], llm) -> list[Planned]:
    sess = work.session
    return plan_candidates(rt, _scope(sess), sess.user_id, candidates, llm, exact=True)


def plan_candidates(
    rt,
    scope: Scope,
    user_id: str,
    candidates: list[Candidate],
    llm,
    *,
    exact: bool = False,
) -> list[Planned]:
    """Decide each candidate against its nearest current neighbours in `scope` (judged in one batch).

    With `exact`, a neighbour must be owned by exactly `scope` (None there means no agent,
    project or team, not any): a session never merges into or supersedes another scope's memory.
    """
    if not candidates:
        return []
    st = rt.settings
    embedder = rt.embedder
    vectors = embedder.embed([c.text for c in candidates]) if embedder is not None else [None] * len(candidates)
    hashes = [content_hash(c.text) for c in candidates]
    with session_scope(rt.engine) as s:
        known = cabinet.known_hashes(s, user_id, hashes, owner=scope if exact else None)
    thresholds = Thresholds(dup=st.dup_threshold, ambiguous_low=st.ambiguous_low)
    sims = _similarities(vectors)
    planned: list[Planned] = []
    found = find_neighbours(rt, scope, [c.text for c in candidates], vectors, exact=exact)
    for cand, digest, stored in zip(candidates, hashes, found):
        neighbours = stored + _pending(planned, cand, sims, hashes)
        if digest in known.current:
            m = known.current[digest]
            neighbours.append(Neighbour(m.id, m.text, m.kind, m.content_hash, 1.0, m.status))
        d = decide(
            cand.text, cand.kind, neighbours, thresholds, forgotten_hashes=known.forgotten, can_judge=llm is not None
        )
        planned.append(Planned(cand, d))
    _judge(llm, planned, _texts(rt, planned))
    return planned


NEIGHBOUR_FIELDS = ("text", "kind", "status", "content_hash")  # what a neighbour search reads


def find_neighbours(rt, scope: Scope, texts: list[str], vectors: list, *, exact: bool = False) -> list[list[Neighbour]]:
    """Each text's nearest current memories in scope: dense when every text has a vector (one
    batched search), else BM25 + word overlap.

    With `exact`, only memories owned by exactly `scope` (see `SearchFilter.exact_scope`)."""
    k = rt.settings.neighbours
    flt = SearchFilter(payload_fields=NEIGHBOUR_FIELDS, exact_scope=exact)
    if vectors and all(v is not None for v in vectors):
        found = rt.index.search_dense_many(vectors, scope, k, flt)
        return [[_neighbour(h.payload, h.memory_id, float(h.score)) for h in hits] for hits in found]
    return [
        [
            _neighbour(h.payload, h.memory_id, token_similarity(text, h.payload.get("text", "")))
            for h in rt.index.search_text(text, scope, k, flt)
        ]
        for text in texts
    ]


def _neighbour(payload: dict, memory_id: str, similarity: float) -> Neighbour:
    text = payload.get("text", "")
    digest = payload.get("content_hash") or content_hash(text)  # points indexed before it was in the payload
    return Neighbour(memory_id, text, payload.get("kind", ""), digest, similarity, payload.get("status", ""))


def _similarities(vectors) -> np.ndarray | None:
    """Cosine similarity of every pair of candidates (the vectors are unit length), or None."""
    if not vectors or any(v is None for v in vectors):
        return None
    matrix = np.asarray(vectors, dtype=np.float64)
    return matrix @ matrix.T


def _pending(planned: list[Planned], cand: Candidate, sims: np.ndarray | None, hashes: list[str]) -> list[Neighbour]:
    """Candidates added earlier in this session count as neighbours too."""
    out = []
    i = len(planned)
    for j, p in enumerate(planned):
        if p.decision.action not in ("add", "judge", "supersede"):
            continue
        sim = float(sims[i, j]) if sims is not None else token_similarity(cand.text, p.candidate.text)
        out.append(Neighbour(f"pending:{j}", p.candidate.text, p.candidate.kind, hashes[j], sim))
    return out


def _texts(rt, planned: list[Planned]) -> dict[str, str]:
    ids = [p.decision.target for p in planned if p.decision.action == "judge" and p.decision.target]
    ids = [i for i in ids if not i.startswith("pending:")]
    if not ids:
        return {}
    with session_scope(rt.engine) as s:
        return {m.id: m.text for m in s.exec(select(Memory).where(Memory.id.in_(ids))).all()}


def _judge(llm, planned: list[Planned], texts: dict[str, str]) -> None:
    """One batched judgement for the session's ambiguous pairs."""
    pending = [p for p in planned if p.decision.action == "judge"]
    if not pending:
        return
    if llm is None:
        for p in pending:
            p.decision = resolve(p.decision, None)
        return
    req = JudgeRequest()
    for p in pending:
        target = p.decision.target or ""
        old = (
            planned[int(target.split(":")[1])].candidate.text
            if target.startswith("pending:")
            else texts.get(target, "")
        )
        req.pairs.append((old, p.candidate.text))
    result, _ = llm.complete_json(system=JUDGE_SYSTEM, user=req.prompt(), schema=Judgements, name="judgements")
    for p, verdict in zip(pending, verdicts_by_pair(result, len(pending))):
        p.decision = resolve(p.decision, verdict)


# --------------------------------------------------------------------------- applying


def _apply(rt, work: Work, planned: list[Planned], run: DreamRun, tally: Tally) -> None:
    """Memories, history and the cursor in one transaction; the index follows via the outbox."""
    sess = work.session
    now = utcnow()
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, sess.id, with_for_update=True)  # row lock: one apply per cursor position
        if cursor is None or cursor.processed_seq != work.processed_seq:
            log.warning("cursor of session %s moved during the pass; its result is dropped", sess.id)
            return
        evidence = [_evidence(sess, p.candidate) for p in planned]
        outcomes = apply_all(s, planned, _scope(sess), source="dream", evidence=evidence, run_id=run.id, now=now)
        cursor.processed_seq = work.upto
        cursor.attempts, cursor.status, cursor.last_error, cursor.updated_at = 0, "ok", None, now
        s.add(cursor)
    tally.candidates += len(planned)
    for p, outcome in zip(planned, outcomes):
        if outcome == "rejected":
            tally.rejected.append({"session_id": sess.id, "text": p.candidate.text, "reason": p.decision.reason})
    tally.merged += outcomes.count("merged")
    tally.added += outcomes.count("added") + outcomes.count("superseded")
    tally.superseded += outcomes.count("superseded")


def _evidence(sess: Session, cand: Candidate) -> list[dict]:
    evidence: dict = {"session_id": sess.id, "external_id": sess.external_id, "seqs": cand.seqs}
    if cand.untrusted:
        evidence["untrusted"] = True  # recorded, but never counts towards verification
    return [evidence]


def apply_all(
    s,
    planned: list[Planned],
    owner: Scope,
    *,
    source: str,
    evidence: list[list[dict]],
    run_id: int | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Apply planned decisions in the caller's transaction; each one's outcome (rejected, merged,
    added or superseded), in order. New memories and their add events are written first, two
    statements in all; merges and supersessions then load their targets like any stored row."""
    now = now or utcnow()
    stored = {m.id: m for m in _lock_targets(s, planned)}
    rows: list[dict] = []
    events: list[dict] = []
    later: list[tuple[str, Planned, str, list[dict]]] = []  # (action, planned, target id, evidence)
    outcomes = []
    superseded: set[str] = set()  # no longer current once this batch is applied
    for p, ev in zip(planned, evidence):
        outcome, target = _resolve(p, planned, stored, superseded)
        if outcome in ("added", "superseded"):
            row = cabinet.memory_row(
                user_id=owner.user_id,
                agent_id=owner.agent_id,
                project=owner.project,
                team=owner.team,
                kind=p.candidate.kind,
                text=p.candidate.text,
                source=source,
                evidence=ev,
                importance=p.candidate.importance,
                tags=p.candidate.tags,
                untrusted=p.candidate.untrusted,
                now=now,
            )
            rows.append(row)
            events.append(
                cabinet.event_row(
                    row["id"], "add", reason=p.decision.reason, run_id=run_id, data={"evidence": ev}, now=now
                )
            )
            p.memory_id = row["id"]
        elif outcome == "merged":
            p.memory_id = target
        if outcome == "superseded":
            superseded.add(target)  # type: ignore[arg-type]
        if outcome in ("merged", "superseded"):
            later.append((outcome, p, target, ev))  # type: ignore[arg-type]
        outcomes.append(outcome)
    cabinet.insert_memories(s, rows, events)
    for outcome, p, target, ev in later:
        m = stored.get(target) or s.get(Memory, target)  # else added earlier in this batch
        if outcome == "merged":
            cabinet.merge_into(
                s, m, ev, run_id=run_id, reason=p.decision.reason, importance=p.candidate.importance, now=now
            )
        else:
            cabinet.supersede(s, m, p.memory_id, run_id=run_id, reason=p.decision.reason, now=now)
    return outcomes


def _lock_targets(s, planned: list[Planned]) -> list[Memory]:
    """Load and row-lock the stored memories the batch may merge into or supersede, in id order
    (two workers locking the same rows cannot deadlock): another worker's merge into the same
    memory waits for this transaction instead of overwriting its evidence."""
    ids = sorted(
        {p.decision.target for p in planned if p.decision.target and not p.decision.target.startswith("pending:")}
    )
    if not ids:
        return []
    return list(s.exec(select(Memory).where(Memory.id.in_(ids)).order_by(Memory.id).with_for_update()).all())


def _resolve(
    p: Planned, planned: list[Planned], stored: dict[str, Memory], superseded: set[str]
) -> tuple[str, str | None]:
    """What applying `p` does, and the id of the current memory it merges into or supersedes:
    one of the locked `stored` rows, or a memory added earlier in the batch (one superseded
    earlier in the batch is not current any more)."""
    d = p.decision
    if d.action == "reject":
        return "rejected", None
    target = _target(d.target, planned, stored)
    if target in superseded:
        target = None
    if d.action == "merge" and target is not None:
        return "merged", target
    if d.action == "supersede" and target is not None:
        return "superseded", target
    return "added", None


def _target(target: str | None, planned: list[Planned], stored: dict[str, Memory]) -> str | None:
    if not target:
        return None
    if target.startswith("pending:"):
        return planned[int(target.split(":")[1])].memory_id
    m = stored.get(target)
    return m.id if m is not None and m.status in CURRENT_STATUSES else None


def counts_as_its_own(exc: Exception) -> bool:
    """Whether a failure counts toward the session's quarantine when it happens: only what the
    model made of this session does. An endpoint that serves no request (`EndpointUnusable`)
    would otherwise quarantine every session it was asked about, each Celery beat, for as long
    as it lasts; a timeout is counted later, if the endpoint answered other requests
    (`_count_timeouts`)."""
    return not isinstance(exc, EndpointUnusable)


def _record_failure(rt, session_id: int, error: str, *, counted: bool) -> tuple[int, str] | None:
    """The cursor stays and says why; a `counted` failure adds to its attempts, up to quarantine.
    Returns the cursor's attempts and last error as recorded (None without a cursor)."""
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, session_id)
        if cursor is None:
            return None
        _count(rt, cursor, error[:2000], counted)
        s.add(cursor)
        recorded = (cursor.attempts, cursor.last_error or "")
    log.warning("session %s failed (%s): %s", session_id, cursor.status, error)
    return recorded


def _count(rt, cursor: Cursor, error: str, counted: bool) -> None:
    cursor.attempts += 1 if counted else 0
    cursor.last_error = error
    cursor.status = "quarantined" if cursor.attempts >= rt.settings.max_attempts else "failed"
    cursor.updated_at = utcnow()


COUNTED_TIMEOUT = "(counted: the endpoint answered other requests)"


def _count_timeouts(rt, llm, timed_out: list[TimedOut], *, may_probe: bool) -> None:
    """A timeout counts toward its session's quarantine when the endpoint answered a call after
    it in this pass, or (unless the pass was halted) answers a probe now: then it is the
    session's own request the model cannot answer in time, and without counting it would be
    sent again every pass, at the model's cost, for ever. When the endpoint answers nothing
    after it (an outage, also one that began mid-pass), nothing is counted."""
    if not timed_out or llm is None:
        return
    waiting = [t for t in timed_out if llm.answered <= t.answered]
    if waiting and not (may_probe and endpoint_answers(llm)):
        log.info("%d timed-out session(s) not counted: the endpoint answered nothing after them", len(waiting))
        timed_out = [t for t in timed_out if t not in waiting]
    for t in timed_out:
        _count_timeout(rt, t)


def _count_timeout(rt, t: TimedOut) -> None:
    """Count the timeout, if the cursor still holds it (another worker may have dreamed or
    failed the session since)."""
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, t.session_id)
        if cursor is None or cursor.status != "failed" or (cursor.attempts, cursor.last_error or "") != t.recorded:
            return
        last = t.recorded[1]
        _count(rt, cursor, f"{last[: 2000 - len(COUNTED_TIMEOUT) - 1]} {COUNTED_TIMEOUT}", True)
        s.add(cursor)
    log.warning("session %s: its timeout counted (%s)", t.session_id, cursor.status)


# --------------------------------------------------------------------------- run record and view


def _guarded(rt):
    if rt.llm is None:
        return None
    st = rt.settings
    return GuardedLLM(rt.llm, token_budget=st.llm_pass_token_budget, breaker_threshold=st.llm_breaker_threshold)


def _extractor(rt, llm) -> Extractor:
    if llm is None:
        return RulesExtractor(limit=rt.settings.entries_per_session)
    return LLMExtractor(llm, limit=rt.settings.entries_per_session)


def _owner(run: DreamRun) -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{run.id}"


def _start_run(rt, trigger: str, extractor: str) -> DreamRun:
    """The run row and its run lease, in one transaction: no sweep ever sees one without the other."""
    with session_scope(rt.engine) as s:
        run = DreamRun(trigger=trigger, status="running", extractor=extractor)
        s.add(run)
        s.flush()
        expires = utcnow() + timedelta(seconds=rt.settings.lease_seconds)
        s.add(Lease(name=leases.run_lease(run.id), owner=_owner(run), expires_at=expires))  # type: ignore[arg-type]
    return run


def _finish_skipped(rt, trigger: str, reason: str) -> DreamRun:
    with session_scope(rt.engine) as s:
        run = DreamRun(trigger=trigger, status="skipped_busy", error=reason, finished_at=utcnow())
        s.add(run)
    return run


def _save_run(rt, run: DreamRun, tally: Tally, llm) -> DreamRun:
    run.candidates, run.added, run.merged = tally.candidates, tally.added, tally.merged
    run.superseded, run.rejected, run.rejections = tally.superseded, len(tally.rejected), tally.rejected
    if llm is not None:
        run.llm_calls = llm.calls
        run.prompt_tokens, run.completion_tokens = llm.usage.prompt_tokens, llm.usage.completion_tokens
    run.finished_at = utcnow()
    with session_scope(rt.engine) as s:
        s.add(run)
    leases.release(rt.engine, leases.run_lease(run.id), _owner(run))  # type: ignore[arg-type]
    return run
