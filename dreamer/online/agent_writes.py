"""Writes by the agent: `remember` and `forget_memory`, through the dreamer's own consolidation.

A remembered fact is decided against its current neighbours owned by exactly the writer's
scope, like a dreamed candidate against its session's (`dreamer.core.consolidate.decide`: a
restatement merges; memories of the same topic and near ones go to the judge when a model is
configured; without one a newer value of a single-valued topic supersedes); it is stored with
source ``agent``, indexed through the outbox, and the user's Markdown is rendered again.

A write goes through the checks every memory does: its text is normalised and its secrets
redacted (`memory_text.stored_text`), and a text the untrusted rule finds steering
(`dreamer.core.trust.steering`, the check every path asks) is refused with the reason (`UntrustedWrite`, a 422): an agent
write is explicit, so the caller is told, where a dreamed candidate is kept flagged untrusted.

A write holds its user's consolidation lock (`rt.user_locks`, across processes and machines)
from the plan until the result is in the index, so two concurrent writes, or a write and a
dream pass, never both add the same new preference; a forget holds it too, so a plan made
before it never brings the forgotten memory back. Within a process, writes of one user then
queue on `user_lock` (the daily-note flush uses it as well); the consolidation lock is taken
first, so a write waits at most `user_lock_wait_seconds` for it, never behind other writes.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeGuard

from pydantic import ValidationError

from dreamer.core.consolidate import Evidence
from dreamer.core.errors import DreamerError, NotFound
from dreamer.core.models import Memory, Session, utcnow
from dreamer.core.scope import Scope
from dreamer.core.topics import Cardinality
from dreamer.core.trust.memory_text import stored_text
from dreamer.core.trust.steering import steering_reason
from dreamer.engine import outbox
from dreamer.engine.consolidation.apply import apply_all
from dreamer.engine.consolidation.judge import LLMJudge
from dreamer.engine.consolidation.plan import plan_candidates
from dreamer.engine.extraction.extract import Candidate, Kind
from dreamer.engine.runtime import Runtime
from dreamer.store import cabinet
from dreamer.store.db import session_scope
from dreamer.store.user_locks import KeyedLocks

log = logging.getLogger(__name__)

AGENT_WRITE_KINDS: tuple[Kind, ...] = (
    "preference",
    "profile",
    "focus",
    "root_cause",
    "interface_behavior",
    "design_decision",
)
DEFAULT_IMPORTANCE = 0.6

_WRITES = KeyedLocks()  # `user_lock`'s


class WriteRejected(DreamerError):
    """Consolidation refused the write (empty text, or a person forgot this memory)."""


class UntrustedWrite(WriteRejected):
    """The text tries to steer the memory system (a forged tag or system line, an instruction
    to the memory system): refused, never stored."""


@contextmanager
def user_lock(user_id: str) -> Iterator[None]:
    """Serialise the cabinet writes of one user within this process."""
    with _WRITES.get(user_id):
        yield


@dataclass(frozen=True)
class Written:
    """What an agent write did: the memory it stored or merged into, and the memories it superseded."""

    memory: Memory
    action: str  # added | merged | superseded
    superseded: tuple[str, ...] = ()


def remember(
    rt: Runtime,
    scope: Scope,
    text: str,
    kind: str = "preference",
    session_id: int | None = None,
    *,
    importance: float = DEFAULT_IMPORTANCE,
    topic: str | None = None,
    cardinality: Cardinality | None = None,
) -> Written:
    """Store what the agent was told to remember: a restatement merges into the existing memory;
    a new value of the slot it fills (`topic`, else as its phrasing makes clear) is judged
    against the old one; without a model, when the slot holds one value, the change is only
    proposed (`held`: both stay current, "may have changed", the pair in the review queue).
    `UntrustedWrite` for a text that tries to steer the memory system."""
    if reason := steering_reason(text):
        raise UntrustedWrite(f"not stored: the text tries to steer the memory system ({reason})")
    candidate = _candidate(stored_text(text), kind, importance, topic, cardinality)
    evidence = _evidence(rt, scope, session_id)
    with rt.user_locks.hold(scope.user_id) as lock, user_lock(scope.user_id):  # the bounded wait first
        judge = LLMJudge(rt.llm) if rt.llm is not None else None
        planned = plan_candidates(rt, scope, scope.user_id, [candidate], judge, exact=True)
        p = planned[0]
        if p.decision.action == "reject":
            raise WriteRejected(f"not stored: {p.decision.reason}")
        lock.confirm()  # a lock that ran out while the model judged may have let another writer in
        with session_scope(rt.engine) as s:
            [outcome] = apply_all(
                s, planned, scope, source="agent", evidence=[evidence], now=utcnow(), tz=rt.settings.tz
            )
            memory = s.get(Memory, p.memory_id)
        if memory is None:
            raise NotFound(f"no memory {p.memory_id}")
        outbox.drain(rt, users=[scope.user_id])  # indexes it and renders the user's view
    log.info("agent write for %s: %s %s (%s)", scope.user_id, outcome, p.memory_id, p.decision.reason)
    replaced = (p.decision.target, *p.decision.also) if outcome == "superseded" else ()
    return Written(memory, outcome, tuple(t for t in replaced if t))


def forget_memory(rt: Runtime, scope: Scope, memory_id: str, reason: str) -> Memory:
    """Forget a memory of the scope (kept for history); NotFound for any other memory."""
    with rt.user_locks.hold(scope.user_id), user_lock(scope.user_id):  # the bounded wait first
        with session_scope(rt.engine) as s:
            m = s.get(Memory, memory_id)
            if m is None or not scope.matches(m):
                raise NotFound(f"no memory {memory_id}")
            m = cabinet.forget(s, memory_id, reason=reason, user_id=scope.user_id)
        outbox.drain(rt, users=[scope.user_id])  # indexes the change and renders the user's view
    return m


def _candidate(
    text: str, kind: str, importance: float, topic: str | None, cardinality: Cardinality | None
) -> Candidate:
    if not _agent_kind(kind):
        raise WriteRejected(f"kind {kind!r} cannot be written by an agent (use one of {', '.join(AGENT_WRITE_KINDS)})")
    try:
        return Candidate(
            kind=kind, text=text, importance=importance, tags=["agent"], topic=topic, cardinality=cardinality
        )
    except ValidationError as exc:
        raise WriteRejected(f"not stored: {exc.errors()[0]['msg']}") from exc


def _agent_kind(kind: str) -> TypeGuard[Kind]:
    return kind in AGENT_WRITE_KINDS


def _evidence(rt: Runtime, scope: Scope, session_id: int | None) -> list[Evidence]:
    if session_id is None:
        return []
    with session_scope(rt.engine) as s:
        sess = s.get(Session, session_id)
    if sess is None or not scope.matches(sess):
        raise NotFound(f"no session {session_id}")
    return [{"session_id": sess.id, "external_id": sess.external_id, "seqs": []}]


__all__ = [
    "AGENT_WRITE_KINDS",
    "UntrustedWrite",
    "WriteRejected",
    "Written",
    "forget_memory",
    "remember",
    "user_lock",
]
