"""Applying a plan: memories and their history written in one transaction, with the session's
cursor advanced in the same one; the index follows via the outbox."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.models import CURRENT_STATUSES, REVIEWED_STATUSES, Cursor, Memory, Session, utcnow
from dreamer.core.scope import Scope
from dreamer.engine.consolidation.guard import PassGuard
from dreamer.engine.consolidation.plan import Planned, owner_scope
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.extraction.transcript import Line
from dreamer.engine.load import Work
from dreamer.engine.runs import Pass
from dreamer.engine.runtime import Runtime
from dreamer.store import cabinet, gate
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

Evidence = dict[str, object]  # one entry of a memory's evidence: where it was said


def apply_session(rt: Runtime, work: Work, planned: list[Planned], p: Pass) -> list[str] | None:
    """Memories, history and the cursor in one transaction, counted in the pass's tally; the index
    follows via the outbox. Returns each planned candidate's outcome (`apply_all`), or None when
    the result was dropped."""
    sess, tally = work.session, p.tally
    now = utcnow()
    with session_scope(rt.engine) as s:
        cursor = s.get(Cursor, sess.id, with_for_update=True)  # row lock: one apply per cursor position
        if cursor is None or cursor.processed_seq != work.processed_seq:
            log.warning("cursor of session %s moved during the pass; its result is dropped", sess.id)
            return None
        evidence = [_evidence(sess, p.candidate) for p in planned]
        said = said_at(work.lines, planned)
        guard = tally.guard = tally.guard or PassGuard(rt.settings.guard_share, rt.settings.guard_min)
        outcomes = apply_all(
            s,
            planned,
            owner_scope(sess),
            source="dream",
            evidence=evidence,
            run_id=p.run.id,
            now=now,
            hold=lambda n: guard.holds(s, sess.user_id, n),
            said=said,
            tz=rt.settings.tz,
            pending=rt.settings.review_mode,
        )
        cursor.processed_seq = work.upto
        cursor.attempts, cursor.status, cursor.last_error, cursor.updated_at = 0, "ok", None, now
        s.add(cursor)
    tally.candidates += len(planned)
    for one, outcome in zip(planned, outcomes):
        if outcome == "rejected":
            tally.rejected.append({"session_id": sess.id, "text": one.candidate.text, "reason": one.decision.reason})
    tally.merged += outcomes.count("merged")
    tally.added += outcomes.count("added") + outcomes.count("superseded") + outcomes.count("held")
    tally.superseded += outcomes.count("superseded")
    tally.held += outcomes.count("held")
    return outcomes


def _evidence(sess: Session, cand: Candidate) -> list[Evidence]:
    evidence: Evidence = {"session_id": sess.id, "external_id": sess.external_id, "seqs": cand.seqs}
    if cand.untrusted:
        evidence["untrusted"] = True  # recorded, but never counts towards verification
        if cand.untrusted_reason:
            evidence["untrusted_reason"] = cand.untrusted_reason  # why: the steering shapes, or not the user's
    return [evidence]


@dataclass(frozen=True)
class _Change:
    """A merge into, or a supersession of, a current memory: applied once the new memories are in."""

    planned: Planned
    target: str
    evidence: list[Evidence]
    new_id: str | None  # the memory superseding the target; None for a merge
    routed: list[str]  # the memories it was routed to the judge with
    position: int  # of its outcome


def apply_all(
    s: DBSession,
    planned: list[Planned],
    owner: Scope,
    *,
    source: str,
    evidence: list[list[Evidence]],
    run_id: int | None = None,
    now: datetime | None = None,
    hold: Callable[[int], bool] | None = None,
    said: list[datetime | None] | None = None,
    tz: tzinfo = UTC,
    pending: bool = False,
) -> list[str]:
    """Apply planned decisions in the caller's transaction (new memories first, then merges and
    supersessions); each one's outcome in order: rejected, merged, added, superseded, or held (added,
    its supersession held for a person: a supersession nobody judged (`Decision.proposed`) always;
    `hold(n)` says whether the batch's n supersessions are, the guard; `pending`, review mode: always). `said`: when each was said (None: `now`), in `tz`."""
    now = now or utcnow()
    stored = {m.id: m for m in _lock_targets(s, planned)}
    rows: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    changes: list[_Change] = []
    outcomes: list[str] = []
    superseded: set[str] = set()  # no longer current once this batch is applied
    for p, ev, at in zip(planned, evidence, said or [None] * len(planned)):
        outcome, target = _resolve(p, planned, stored, superseded)
        routed = _routed(p, planned)
        if outcome in ("added", "superseded"):
            row = _memory_row(p, owner, source=source, evidence=ev, now=now, said=at, tz=tz, pending=pending)
            rows.append(row)
            data = {"evidence": ev, "routed": routed}
            events.append(
                cabinet.event_row(row["id"], "add", reason=p.decision.reason, run_id=run_id, data=data, now=now)
            )
            p.memory_id = row["id"]
        elif outcome == "merged":
            p.memory_id = target
        if outcome == "superseded" and target is not None:
            also = [t for t in (_target(a, planned, stored) for a in p.decision.also) if t and t not in superseded]
            for old in dict.fromkeys([target, *also]):
                superseded.add(old)
                changes.append(_Change(p, old, ev, new_id=p.memory_id, routed=routed, position=len(outcomes)))
        elif outcome == "merged" and target is not None:
            changes.append(_Change(p, target, ev, new_id=None, routed=routed, position=len(outcomes)))
        outcomes.append(outcome)
    held = _held([c for c in changes if c.new_id is not None], stored, hold, pending)
    gate.insert_memories(s, rows, events)
    _merge_and_supersede(s, changes, stored, run_id=run_id, now=now, held=held, said=said, tz=tz)
    return ["held" if i in held else o for i, o in enumerate(outcomes)]


def _held(
    removals: list[_Change], stored: dict[str, Memory], hold: Callable[[int], bool] | None, pending: bool
) -> set[int]:
    """The positions of the supersessions held for a person: always those nobody judged
    (`proposed`); of the stored targets, all if the guard holds the batch or the new memories wait
    for review, and always those of a record a person wrote or edited (only a person replaces theirs)."""
    proposed = {c.position for c in removals if c.planned.decision.proposed}
    judged = [c for c in removals if c.target in stored and not c.planned.decision.proposed]
    held = {c.position for c in judged} if pending or (hold is not None and hold(len(judged))) else set()
    return proposed | held | {c.position for c in judged if stored[c.target].source == "human"}


def said_at(lines: list[Line], planned: list[Planned]) -> list[datetime | None]:
    """When each candidate was said: the latest time of the lines it rests on (None: unknown)."""
    times = {ln.seq: ln.at for ln in lines if ln.at is not None}
    return [max((times[q] for q in p.candidate.seqs if q in times), default=None) for p in planned]


def _memory_row(
    p: Planned,
    owner: Scope,
    *,
    source: str,
    evidence: list[Evidence],
    now: datetime,
    said: datetime | None,
    tz: tzinfo,
    pending: bool = False,
) -> dict[str, Any]:
    """The row of the memory a candidate adds, in `owner`'s scope, valid from when it was said
    (`pending`: waiting for a person's review)."""
    row = gate.memory_row(
        user_id=owner.user_id,
        agent_id=owner.agent_id,
        project=owner.project,
        team=owner.team,
        kind=p.candidate.kind,
        text=p.candidate.text,
        source=source,
        evidence=evidence,
        importance=p.candidate.importance,
        tags=p.candidate.tags,
        untrusted=p.candidate.untrusted,
        topic=p.topic.key if p.topic else None,
        cardinality=p.topic.cardinality if p.topic else None,
        now=now,
        valid_from=said,
        tz=tz,
    )
    return row | {"status": "pending"} if pending else row


def _merge_and_supersede(
    s: DBSession,
    changes: list[_Change],
    stored: dict[str, Memory],
    *,
    run_id: int | None,
    now: datetime,
    held: set[int],
    said: list[datetime | None] | None,
    tz: tzinfo,
) -> None:
    """Each merge and supersession, into a locked stored row or a memory added earlier in the
    batch; the supersessions at a `held` position are held for a person instead. A merge keeps
    the later end of a dated fact: as stored, or counted from when it was said again."""
    for c in changes:
        m = stored.get(c.target) or s.get_one(Memory, c.target)  # else added earlier in this batch
        reason = c.planned.decision.reason
        if c.new_id is None:
            importance = c.planned.candidate.importance
            at = (said[c.position] if said else None) or now
            until = gate.valid_until_of(c.planned.candidate.text, c.planned.candidate.kind, at, tz)
            data = {"routed": c.routed}
            cabinet.merge_into(
                s,
                m,
                c.evidence,
                run_id=run_id,
                reason=reason,
                importance=importance,
                now=now,
                data=data,
                valid_until=until,
            )
        elif c.position in held:
            cabinet.hold(s, m, c.new_id, run_id=run_id, reason=reason, now=now)
        else:
            cabinet.supersede(s, m, c.new_id, run_id=run_id, reason=reason, now=now, data={"routed": c.routed})


def _lock_targets(s: DBSession, planned: list[Planned]) -> list[Memory]:
    """Load and row-lock the stored memories the batch may merge into or supersede, in id order
    (two workers locking the same rows cannot deadlock): another worker's merge into the same
    memory waits for this transaction instead of overwriting its evidence."""
    named = {t for p in planned for t in (p.decision.target, *p.decision.also) if t}
    ids = sorted(t for t in named if not t.startswith("pending:"))
    if not ids:
        return []
    return list(s.exec(select(Memory).where(col(Memory.id).in_(ids)).order_by(col(Memory.id)).with_for_update()).all())


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


def _routed(p: Planned, planned: list[Planned]) -> list[str]:
    """The ids of the memories `p` was routed to the judge with (a candidate of the batch by the
    memory it became)."""
    ids = (planned[int(t.split(":")[1])].memory_id if t.startswith("pending:") else t for t in p.decision.routed)
    return [i for i in ids if i]


def _target(target: str | None, planned: list[Planned], stored: dict[str, Memory]) -> str | None:
    if not target:
        return None
    if target.startswith("pending:"):
        return planned[int(target.split(":")[1])].memory_id
    m = stored.get(target)
    return m.id if m is not None and m.status in (*CURRENT_STATUSES, *REVIEWED_STATUSES) else None
