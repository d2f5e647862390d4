"""Reprocessing: pick sessions, reset their cursors, estimate the cost, dream over them again.

A reset cursor (processed_seq 0, attempts 0, status ok) makes a session due again from its
first message, quarantined or not. Consolidation then finds the memories it produced the first
time (same content hash, or a near neighbour) and merges into them, so reprocessing adds
evidence and history (`merge` events), never duplicates.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import ConfigError
from dreamer.core.models import Cursor, Lease, Message, Session, utcnow
from dreamer.core.private import check_free_space
from dreamer.core.settings import Settings
from dreamer.engine.extraction.extract import extraction_card, extraction_prompt
from dreamer.engine.runtime import Runtime
from dreamer.llm.bill import billed_prompt
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

BATCH = 500


@dataclass(frozen=True)
class Selection:
    """Exactly one of: explicit session ids, a user, sessions active since a time,
    the quarantined sessions, or everything."""

    session_ids: tuple[int, ...] = ()
    user_id: str | None = None
    since: datetime | None = None
    quarantined: bool = False
    everything: bool = False

    def __post_init__(self) -> None:
        chosen = [
            bool(self.session_ids),
            self.user_id is not None,
            self.since is not None,
            self.quarantined,
            self.everything,
        ]
        if sum(chosen) != 1:
            raise ConfigError("choose exactly one of --session, --user, --since, --quarantined, --all")

    def describe(self) -> str:
        if self.session_ids:
            return "session(s) " + ", ".join(str(i) for i in self.session_ids)
        if self.user_id is not None:
            return f"the sessions of user {self.user_id}"
        if self.since is not None:
            return f"the sessions active since {self.since.isoformat()}"
        return "the quarantined sessions" if self.quarantined else "every session"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["session_ids"] = list(self.session_ids)
        data["since"] = self.since.isoformat() if self.since else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Selection:
        since = data.get("since")
        return cls(
            session_ids=tuple(int(i) for i in data.get("session_ids") or ()),
            user_id=data.get("user_id"),
            since=parse_since(since) if since else None,
            quarantined=bool(data.get("quarantined")),
            everything=bool(data.get("everything")),
        )


def parse_since(text: str) -> datetime:
    """An ISO date or date-time; without a zone it is UTC."""
    try:
        value = datetime.fromisoformat(text)
        value = value if value.tzinfo else value.replace(tzinfo=UTC)
        return value.astimezone(UTC)  # a time the store can compare (one near year 1 or 9999 may not be)
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"--since wants an ISO date such as 2024-05-01, got {text!r}") from exc


def select_ids(s: DBSession, sel: Selection) -> list[int]:
    q = select(col(Session.id)).order_by(col(Session.id))
    if sel.session_ids:
        q = q.where(col(Session.id).in_(sel.session_ids))
    elif sel.user_id is not None:
        q = q.where(Session.user_id == sel.user_id)
    elif sel.since is not None:
        q = q.where(Session.updated_at >= sel.since)
    elif sel.quarantined:
        q = q.join(Cursor, col(Cursor.session_id) == col(Session.id)).where(Cursor.status == "quarantined")
    return [i for i in s.exec(q).all() if i is not None]


MARK_PREFIX = "reprocess:"  # a request's mark: a lease row, its name this and the request's id


@dataclass(frozen=True)
class Once:
    """A reprocess request (a Celery task's id, the same when it is redelivered), marked done in
    the transaction that rewinds its cursors; the mark is kept `keep_seconds`, longer than a
    redelivery (or two) can take."""

    request_id: str
    keep_seconds: float

    @property
    def name(self) -> str:
        """The mark's lease name: an id too long for it (255 characters) goes in as its sha-256."""
        rid = self.request_id
        return MARK_PREFIX + (
            rid if len(rid) <= 200 else hashlib.sha256(rid.encode("utf-8", "surrogatepass")).hexdigest()
        )


def reset_cursors(
    engine: Engine,
    session_ids: Iterable[int],
    now: datetime | None = None,
    *,
    once: Once | None = None,
) -> int | None:
    """Rewind the cursors to the start; returns how many were reset. With `once`, its mark is
    written in the same transaction, and a request whose mark is there already (a redelivered
    task) rewinds nothing again: None."""
    now = now or utcnow()
    ids = list(session_ids)
    try:
        with session_scope(engine) as s:
            if once is not None:
                s.exec(delete(Lease).where(col(Lease.name).like(MARK_PREFIX + "%")).where(col(Lease.expires_at) < now))
                s.add(Lease(name=once.name, owner=once.name, expires_at=now + timedelta(seconds=once.keep_seconds)))
                s.flush()  # a mark already there stops the rewind here
            total = _rewind(s, ids, now)
    except IntegrityError:
        if once is None:
            raise
        log.info("%s: its cursors were rewound already", once.name)
        return None
    log.info("reset %d cursor(s)", total)
    return total


def _rewind(s: DBSession, ids: list[int], now: datetime) -> int:
    total = 0
    for start in range(0, len(ids), BATCH):
        stmt = (
            update(Cursor)
            .where(col(Cursor.session_id).in_(ids[start : start + BATCH]))
            .values(processed_seq=0, attempts=0, status="ok", last_error=None, updated_at=now)
        )
        total += s.exec(stmt).rowcount
    return total


@dataclass
class Estimate:
    sessions: int = 0
    messages: int = 0
    message_tokens: int = 0
    chunks: int = 0
    overhead_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.message_tokens + self.overhead_tokens


def prompt_overhead(settings: Settings) -> int:
    """Tokens an extraction call is billed besides the transcript's lines: the longer card
    (code), its schema, the transcript tags and each message's overhead (`dreamer.llm.bill`)."""
    _, schema = extraction_card("code")
    system = extraction_prompt("code", settings.entries_per_session)
    return billed_prompt(system, "<transcript>\n\n</transcript>", schema, "memories")


def estimate(s: DBSession, session_ids: list[int], settings: Settings) -> Estimate:
    """What reprocessing these sessions would send to the LLM: every message, plus the prompt
    overhead once per chunk of `chunk_tokens`."""
    est = Estimate(sessions=len(session_ids))
    overhead = prompt_overhead(settings)
    for start in range(0, len(session_ids), BATCH):
        rows = s.exec(
            select(Message.session_id, func.count(), func.coalesce(func.sum(Message.token_count), 0))
            .where(col(Message.session_id).in_(session_ids[start : start + BATCH]))
            .group_by(col(Message.session_id))
        ).all()
        for _sid, n, tokens in rows:
            est.messages += n
            est.message_tokens += int(tokens)
            chunks = max(1, math.ceil(int(tokens) / max(1, settings.chunk_tokens)))
            est.chunks += chunks
            est.overhead_tokens += chunks * overhead
    return est


@dataclass
class Progress:
    sessions: int = 0
    messages: int = 0
    added: int = 0
    merged: int = 0
    failed: int = 0  # sessions whose pass failed (their cursors say why)
    runs: list[int] = field(default_factory=list)

    @property
    def memories_touched(self) -> int:
        return self.added + self.merged


def reprocess(
    rt: Runtime,
    session_ids: list[int],
    *,
    on_session: Callable[[int, Progress], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> Progress:
    """Reset the cursors of `session_ids` and dream over each until it is caught up.

    An embedded index stays taken until the end (the caller closes the runtime): reopening it
    per session would cost more than the sessions."""
    from dreamer.engine.jobs import run_session

    check_free_space(rt.settings.data_dir, rt.settings.min_free_mb)  # before any cursor is rewound
    rt.index_ready()
    reset_cursors(rt.engine, session_ids)
    done = Progress()
    for session_id in session_ids:
        if stop is not None and stop():
            break
        for run in run_session(rt, session_id, trigger="reprocess", catch_up=True, release=False):
            done.messages += run.messages
            done.added += run.added
            done.merged += run.merged
            done.failed += run.failed_sessions
            if run.id is not None:
                done.runs.append(run.id)
        done.sessions += 1
        if on_session is not None:
            on_session(session_id, done)
    return done
