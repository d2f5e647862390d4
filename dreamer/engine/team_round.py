"""Closing a team round: the round's lines in, the team's memory out.

The leader hands in a round (its messages, or the ids of the sessions it ran in); the model
sorts what the round taught under the four tags of the team card (`dreamer/llm/cards/team.md`);
each item is then consolidated into the team's scope exactly as a dreamed candidate into its
session's owner (`engine/plan`: merge, supersede, judge; `engine/apply`: memories, history
events and a run row in one transaction), indexed through the outbox, and the team's Markdown
file rendered with the user's view. A temporary team's round writes nothing at all.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field
from sqlmodel import col, select

from dreamer.core.days import local_day
from dreamer.core.errors import ConfigError, NotFound, WindowTooSmall
from dreamer.core.models import TEAM_KINDS, DreamRun, Message, Session, Team, utcnow
from dreamer.core.run_status import RunStatus
from dreamer.core.secrets.redact import clean_for_model
from dreamer.core.teams import TEAM_SOURCE, TeamRef, team_scope, writes
from dreamer.core.trust.memory_text import stored_text
from dreamer.engine import outbox
from dreamer.engine.consolidation.apply import apply_all
from dreamer.engine.consolidation.judge import LLMJudge
from dreamer.engine.consolidation.plan import Planned, plan_candidates
from dreamer.engine.extraction.extract import (
    LEAN_BELOW,
    MIN_TRANSCRIPT,
    AnswerBase,
    Candidate,
    Item,
    collapse_duplicates,
    reply_budget,
)
from dreamer.engine.extraction.grounding import ground
from dreamer.engine.extraction.transcript import Line, chunk_lines, render_transcript
from dreamer.engine.extraction.untrusted import steering_with_lines
from dreamer.engine.runs import Tally, save_run, start_run
from dreamer.engine.runtime import Runtime
from dreamer.llm.cards import render_card
from dreamer.llm.guard import GuardedLLM
from dreamer.store.db import session_scope
from dreamer.store.teams import count_round

log = logging.getLogger(__name__)

TRIGGER = "team-round"  # the trigger of a round's run row
TEMPORARY_NOTE = "temporary team: a round writes nothing"


class TeamAnswer(AnswerBase):
    """The model's answer to the team card: one list per tag."""

    decision: list[Item] = Field(default_factory=list, description="a choice the team made, and why")
    lesson: list[Item] = Field(
        default_factory=list, description="what worked, and what caused rework or failed, with its fix"
    )
    expertise: list[Item] = Field(default_factory=list, description="who is good at what, naming the member")
    context: list[Item] = Field(
        default_factory=list, description="business constraints the work keeps to: deadlines, budgets, clients"
    )


def team_prompt(limit: int, *, examples: bool = True) -> str:
    """The system prompt of a round's extraction call, asking for at most `limit` items."""
    return render_card("team", TeamAnswer, examples=examples, limit=limit)


class RoundMessage(BaseModel):
    """One message of a round, as the leader hands it in."""

    speaker: str = Field(min_length=1, max_length=255, description="the member who said it")
    text: str = Field(min_length=1, max_length=100_000)
    role: str = Field("user", pattern="^(user|assistant|tool)$")


@dataclass
class RoundResult:
    """What closing a round did."""

    team: str
    temporary: bool
    round: int = 0  # the round's number, counted from 1 (0: a temporary team's, not counted)
    written: bool = False
    added: int = 0
    merged: int = 0
    superseded: int = 0
    rejected: int = 0
    memory_ids: list[str] = field(default_factory=list)
    run_id: int | None = None
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def ref(team: Team) -> TeamRef:
    return TeamRef(team.user_id, team.name, team.leader, team.temporary)


def message_lines(messages: Sequence[RoundMessage], at: datetime, tz: Any) -> list[Line]:
    """The round's messages as transcript lines, numbered from 1; a member speaks as a named user."""
    day = local_day(at, tz)
    return [
        Line(i, m.role, m.speaker if m.role == "user" else None, clean_for_model(m.text), day=day, at=at)
        for i, m in enumerate(messages, start=1)
    ]


def session_lines(rt: Runtime, team: Team, external_ids: Sequence[str]) -> tuple[list[Line], dict[int, Any]]:
    """The messages of the team's sessions named by `external_ids`, as lines numbered across
    them, and where each line came from (session id, external id, seq). `NotFound` for a session
    that is not the team's."""
    lines: list[Line] = []
    origin: dict[int, Any] = {}
    with session_scope(rt.engine) as s:
        for ext in external_ids:
            sess = s.exec(select(Session).where(Session.user_id == team.user_id, Session.external_id == ext)).first()
            if sess is None or sess.team != team.name:
                raise NotFound(f"team {team.name!r} has no session {ext!r}")
            rows = s.exec(select(Message).where(Message.session_id == sess.id).order_by(col(Message.seq))).all()
            for m in rows:
                n = len(lines) + 1
                name = (m.name or sess.agent_id) if m.role == "user" else None
                day = local_day(m.created_at, rt.settings.tz)
                lines.append(Line(n, m.role, name, clean_for_model(m.content), day=day, at=m.created_at))
                origin[n] = (sess.id, sess.external_id, m.seq)
    return lines, origin


def close_round(rt: Runtime, team: Team, lines: list[Line], origin: dict[int, Any] | None = None) -> RoundResult:
    """Extract what the round taught and consolidate it into the team's memory; nothing at all
    for a temporary team. `origin`: where each line came from (a session's message), else the
    round's own numbering is the evidence."""
    result = RoundResult(team.name, team.temporary)
    if not writes(ref(team)):
        result.note = TEMPORARY_NOTE
        return result
    if rt.llm is None:
        raise ConfigError("closing a team round needs a model: set DREAMER_LLM_BASE_URL")
    if not lines:
        raise NotFound("the round has no messages")
    st = rt.settings
    llm = GuardedLLM(rt.llm, token_budget=st.llm_pass_token_budget, breaker_threshold=st.llm_breaker_threshold)
    run = start_run(rt, TRIGGER, f"llm:{rt.llm.name}"[:16])
    tally = Tally()
    try:
        candidates, ungrounded = _grounded(
            rt, team, lines, _extract(llm, lines, st.team_round_entries, st.chunk_tokens)
        )
        tally.rejected += [{"session_id": None, "text": c.text, "reason": c.ungrounded or ""} for c in ungrounded]
        result.round = count_round(rt.engine, team)
        _consolidate(rt, team, llm, candidates, _evidence(candidates, result.round, origin), run, tally, result)
    except BaseException as exc:
        run.status, run.error = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        save_run(rt, run, tally, llm)
        raise
    run.status, run.sessions, run.messages = RunStatus.OK, 1, len(lines)
    save_run(rt, run, tally, llm)
    result.run_id, result.written = run.id, True
    result.added, result.merged, result.superseded = tally.added, tally.merged, tally.superseded
    result.rejected = len(tally.rejected)
    return result


def team_card(llm: GuardedLLM, limit: int) -> tuple[str, int]:
    """The card a round's calls send (without its worked examples when the model's window is
    small, as extraction does) and the transcript tokens each call may then carry."""
    card = team_prompt(limit)
    if llm.room(card, TeamAnswer, reply_budget(limit)) < LEAN_BELOW:
        card = team_prompt(limit, examples=False)
    room = llm.room(card, TeamAnswer, reply_budget(limit))
    if room < MIN_TRANSCRIPT:
        raise WindowTooSmall(
            f"the team card (without its examples), its schema and a reply leave {room} tokens of the "
            f"model's window for the round (at least {MIN_TRANSCRIPT} needed): use a model with a larger window"
        )
    return card, room


def _extract(llm: GuardedLLM, lines: list[Line], limit: int, chunk_tokens: int) -> list[Candidate]:
    """The round's items, in calls of at most `chunk_tokens` of transcript (fewer where the
    model's window holds less), each citing only lines its call showed, flagged untrusted when
    it or its lines try to steer the memory system; the most important `limit`."""
    card, room = team_card(llm, limit)
    whole = {ln.seq: ln for ln in lines}  # a chunk may cut a long line: steering is read on all of it
    out = []
    for chunk in chunk_lines(lines, min(chunk_tokens, room)):
        parsed, _usage = llm.complete_json(
            system=card,
            user=render_transcript(chunk.lines),
            schema=TeamAnswer,
            name="team_memories",
            reply_tokens=reply_budget(limit),
        )
        shown = {ln.seq for ln in chunk.lines}
        for c in parsed.candidates():
            seqs = [q for q in dict.fromkeys(c.seqs) if q in shown]
            if c.kind not in TEAM_KINDS or not seqs:
                continue
            reason = steering_with_lines(c.text, [whole[q] for q in seqs], "team")
            update = {"seqs": seqs, "text": stored_text(c.text), "untrusted": reason is not None}
            out.append(c.model_copy(update={**update, "untrusted_reason": reason}))
    ranked = sorted(collapse_duplicates(out), key=lambda c: -c.importance)
    return ranked[:limit]


def _grounded(
    rt: Runtime, team: Team, lines: list[Line], candidates: list[Candidate]
) -> tuple[list[Candidate], list[Candidate]]:
    """The candidates that rest on what the round said, and those that do not (a name, number or
    claim no line of theirs gives), checked as a dream pass checks a session's."""
    checked = [c for _, c in ground(rt, team.user_id, [(0, c) for c in candidates], {0: lines})]
    return [c for c in checked if c.ungrounded is None], [c for c in checked if c.ungrounded is not None]


def _evidence(candidates: list[Candidate], round_no: int, origin: dict[int, Any] | None) -> list[list[Any]]:
    """Each candidate's evidence: the sessions' messages it rests on, or the round's lines."""
    out = []
    for c in candidates:
        if origin is None:
            out.append([{"round": round_no, "seqs": c.seqs}])
            continue
        by_session: dict[tuple[int, str], list[int]] = {}
        for q in c.seqs:
            sid, ext, seq = origin[q]
            by_session.setdefault((sid, ext), []).append(seq)
        out.append(
            [{"session_id": k[0], "external_id": k[1], "seqs": v, "round": round_no} for k, v in by_session.items()]
        )
    return out


def _consolidate(
    rt: Runtime,
    team: Team,
    llm: GuardedLLM,
    candidates: list[Candidate],
    evidence: list[list[Any]],
    run: DreamRun,
    tally: Tally,
    result: RoundResult,
) -> None:
    """Plan the candidates against the team's current memory and apply them in one transaction,
    under the user's consolidation lock; then index and render."""
    scope = team_scope(team.user_id, team.name)
    with rt.user_locks.hold(team.user_id) as lock:
        planned: list[Planned] = plan_candidates(rt, scope, team.user_id, candidates, LLMJudge(llm), exact=True)
        lock.confirm()
        with session_scope(rt.engine) as s:
            outcomes = apply_all(
                s, planned, scope, source=TEAM_SOURCE, evidence=evidence, run_id=run.id, now=utcnow(), tz=rt.settings.tz
            )
        outbox.drain(rt, users=[team.user_id])
    tally.candidates += len(planned)
    for p, outcome in zip(planned, outcomes):
        if outcome == "rejected":
            tally.rejected.append({"session_id": None, "text": p.candidate.text, "reason": p.decision.reason})
        elif p.memory_id:
            result.memory_ids.append(p.memory_id)
    tally.merged += outcomes.count("merged")
    tally.added += outcomes.count("added") + outcomes.count("superseded") + outcomes.count("held")
    tally.superseded += outcomes.count("superseded")
    log.info("team %s round %d: %s", team.name, result.round, ", ".join(outcomes) or "nothing")
