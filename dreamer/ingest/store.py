"""Writing transcripts to the SQL store: the recording API and what it shares with file import.

Recording is idempotent: a transcript given again appends only the messages beyond what is
stored, and a transcript whose stored messages differ is left untouched and reported.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.engine import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.errors import IngestError, TooLarge
from dreamer.core.meter import MeterState, advance
from dreamer.core.models import MODES, ROLES, Cursor, Message, Session, utcnow
from dreamer.core.tokens import count_tokens
from dreamer.ingest import openai_jsonl
from dreamer.ingest.base import (
    DEFAULT_MAX_MESSAGE_BYTES,
    MAX_FIELD_CHARS,
    LineRejected,
    ParsedMessage,
    as_utc,
    check_message,
    clean_text,
    identifier_problem,
)
from dreamer.store import gate
from dreamer.store.db import conflict_insert, is_postgres, session_scope

log = logging.getLogger(__name__)

INSERT_BATCH = 1000
CHANGED_REASON = "transcript changed: earlier messages differ from the stored ones; not imported"


@dataclass
class RecordResult:
    session_id: int
    external_id: str
    added: int
    skipped: int
    changed: bool = False


@dataclass
class SessionTarget:
    """Which session row a transcript belongs to, and what to create it with."""

    external_id: str
    user_id: str
    source: str
    agent_id: str | None = None
    project: str | None = None
    team: str | None = None
    mode: str = "agent"
    title: str | None = None
    created_at: datetime | None = None


# --- public API -----------------------------------------------------------------


def record_messages(
    engine: Engine,
    external_id: str,
    messages: Sequence[ParsedMessage | dict[str, Any]],
    *,
    user_id: str,
    agent_id: str | None = None,
    project: str | None = None,
    team: str | None = None,
    mode: str = "agent",
    source: str = "api",
    title: str | None = None,
    db_session: DBSession | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    raw: bool = False,
) -> RecordResult:
    """Store a session's transcript (the whole of it, as known so far); append only the new tail.

    Works inside `db_session` without committing when one is given, else in its own transaction.
    Raises `IngestError` for an invalid message or argument (`TooLarge` for one over the size limit).
    Messages are stored with their secrets redacted unless `raw` (`DREAMER_STORE_RAW_MESSAGES`).
    """
    parsed = checked_messages(messages, max_message_bytes)
    target = session_target(external_id, user_id, source, agent_id, project, team, mode, title)
    if db_session is not None:
        return record_session(db_session, target, parsed, raw=raw)
    with session_scope(engine) as s:
        return record_session(s, target, parsed, raw=raw)


def append_messages(
    engine: Engine,
    external_id: str,
    messages: Sequence[ParsedMessage | dict[str, Any]],
    *,
    user_id: str,
    agent_id: str | None = None,
    project: str | None = None,
    team: str | None = None,
    mode: str = "agent",
    source: str = "api",
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    db_session: DBSession | None = None,
    raw: bool = False,
) -> RecordResult:
    """Append only the new messages of a live session (created when missing) after its last one.

    The live-agent path: unlike `record_messages`, nothing is compared with what is stored, so an
    agent sends each message once. Works inside `db_session` without committing when one is
    given, else in its own transaction. Raises `IngestError` for an invalid message or argument
    (`TooLarge` for one over the size limit). Messages are stored with their secrets redacted
    unless `raw`.
    """
    parsed = checked_messages(messages, max_message_bytes)
    target = session_target(external_id, user_id, source, agent_id, project, team, mode, None)
    hashes = [message_hash(m.role, m.name, m.content, m.tool_call_id) for m in parsed]
    if db_session is not None:
        return _append_live(db_session, target, parsed, hashes, raw)
    with session_scope(engine) as s:
        return _append_live(s, target, parsed, hashes, raw)


def _append_live(
    s: DBSession, target: SessionTarget, parsed: list[ParsedMessage], hashes: list[str], raw: bool
) -> RecordResult:
    row = _session_row(s, target, parsed)
    if parsed:
        _append(s, row, parsed, hashes, raw)
    return RecordResult(_id_of(row), target.external_id, added=len(parsed), skipped=0)


def message_hash(role: str, name: str | None, content: str, tool_call_id: str | None) -> str:
    """sha256 of a message's identity: role, name, content and tool call id."""
    payload = json.dumps([role, name, content, tool_call_id], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def checked_messages(messages: Sequence[ParsedMessage | dict[str, Any]], max_message_bytes: int) -> list[ParsedMessage]:
    """Every message validated (`as_message`) and within `max_message_bytes`, as ingest checks it;
    `TooLarge` names the first one over it, before anything is stored."""
    parsed = [as_message(m, i) for i, m in enumerate(messages, start=1)]
    for i, message in enumerate(parsed, start=1):
        try:
            check_message(message, max_message_bytes)
        except LineRejected as exc:
            raise TooLarge(
                f"message {i} of {len(parsed)} refused ({exc}, max_message_bytes): nothing was stored"
            ) from exc
    return parsed


def as_message(item: ParsedMessage | dict[str, Any], position: int = 0) -> ParsedMessage:
    """Validate a message given to the recording API; dicts become `ParsedMessage`."""
    if isinstance(item, ParsedMessage):
        message = item
        if isinstance(message.content, str):
            message = replace(message, content=clean_text(message.content))
    elif isinstance(item, dict):
        message = _from_dict(item, position)
    else:
        raise IngestError(f"message {position}: expected a dict or ParsedMessage, got {type(item).__name__}")
    if message.role not in ROLES:
        raise IngestError(f"message {position}: unknown role {message.role!r} (expected one of {', '.join(ROLES)})")
    if not isinstance(message.content, str):
        raise IngestError(f"message {position}: content must be a string")
    for what in ("name", "tool_call_id"):
        value = getattr(message, what)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_FIELD_CHARS):
            raise IngestError(f"message {position}: {what} must be a string of at most {MAX_FIELD_CHARS} characters")
    return message


# --- validation helpers -----------------------------------------------------------


def _from_dict(item: dict[str, Any], position: int) -> ParsedMessage:
    """An OpenAI-style message dict (string or list-of-parts content, tool calls)."""
    try:
        message = openai_jsonl.to_message(item)
    except LineRejected as exc:
        raise IngestError(f"message {position}: {exc}") from exc
    if isinstance(item.get("meta"), dict):
        message.meta = item["meta"]
    return message


def session_target(
    external_id: str,
    user_id: str | None,
    source: str,
    agent_id: str | None,
    project: str | None,
    team: str | None,
    mode: str,
    title: str | None,
    created_at: datetime | None = None,
) -> SessionTarget:
    external_id = _required("external_id", external_id)
    owner = _required("user_id", user_id)
    source = _required("source", source)
    for what, value in (
        ("external_id", external_id),
        ("user_id", user_id),
        ("agent_id", agent_id),
        ("project", project),
        ("team", team),
    ):
        if value is None:
            continue
        if not isinstance(value, str):
            raise IngestError(f"{what} must be a string")
        if len(value) > MAX_FIELD_CHARS:
            raise IngestError(f"{what} longer than {MAX_FIELD_CHARS} characters")
        if problem := identifier_problem(value):
            raise IngestError(f"{what} contains {problem}")
    if mode not in MODES:
        raise IngestError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
    return SessionTarget(
        external_id=external_id,
        user_id=owner,
        source=source,
        agent_id=agent_id,
        project=project,
        team=team,
        mode=mode,
        title=title[:MAX_FIELD_CHARS] if title else None,
        created_at=created_at,
    )


def _required(what: str, value: object) -> str:
    if not isinstance(value, str) or not value:
        raise IngestError(f"{what} is required")
    return value


# --- writing ----------------------------------------------------------------------


def record_session(
    s: DBSession, target: SessionTarget, messages: list[ParsedMessage], *, raw: bool = False
) -> RecordResult:
    """Store a transcript's messages beyond those stored (their secrets redacted unless `raw`)."""
    row = _session_row(s, target, messages)
    session_id = _id_of(row)
    hashes = [message_hash(m.role, m.name, m.content, m.tool_call_id) for m in messages]
    matched = _stored_prefix(s, session_id, hashes)
    if matched is None:
        log.warning("session %s (%s): %s", target.external_id, session_id, CHANGED_REASON)
        return RecordResult(session_id, target.external_id, added=0, skipped=0, changed=True)
    new = messages[matched:]
    if new:
        if row.title is None and target.title:
            row.title = target.title
        _append(s, row, new, hashes[matched:], raw)
    return RecordResult(session_id, target.external_id, added=len(new), skipped=matched)


def _session_row(s: DBSession, target: SessionTarget, messages: list[ParsedMessage]) -> Session:
    """The session row, created (with its cursor) when missing.

    PostgreSQL locks the row FOR UPDATE. SQLite tries the insert first, so the transaction holds
    the write lock before it reads what is stored and concurrent writers queue instead of clashing.
    """
    key = (
        (col(Session.user_id) == target.user_id)
        & (col(Session.source) == target.source)
        & (col(Session.external_id) == target.external_id)
    )
    query = select(Session).where(key).with_for_update().execution_options(populate_existing=True)
    if is_postgres(s.get_bind()):
        row = s.exec(query).first()
        if row is not None:
            return row
    created = _insert_session(s, target, messages)
    if created is not None:
        s.exec(insert(Cursor).values(session_id=created, processed_seq=0, updated_at=utcnow()))
    return s.exec(query).one()


def _insert_session(s: DBSession, target: SessionTarget, messages: list[ParsedMessage]) -> int | None:
    """Insert the session row unless a concurrent writer did; the new id, or None."""
    now = utcnow()
    started = target.created_at or next((m.created_at for m in messages if m.created_at), None) or now
    values = dict(
        external_id=target.external_id,
        source=target.source,
        user_id=target.user_id,
        agent_id=target.agent_id,
        project=target.project,
        team=target.team,
        mode=target.mode,
        title=target.title,
        created_at=as_utc(started),
        updated_at=now,
        message_count=0,
        rounds=0,
        last_seq=0,
    )
    upsert = conflict_insert(s.get_bind().dialect.name)
    if upsert is not None:
        stmt = (
            upsert(Session)
            .values(**values)
            .on_conflict_do_nothing(index_elements=["user_id", "source", "external_id"])
            .returning(col(Session.id))
        )
    else:
        stmt = insert(Session).values(**values).returning(col(Session.id))
    created: int | None = s.exec(stmt).scalar_one_or_none()
    return created


def _stored_prefix(s: DBSession, session_id: int, hashes: list[str]) -> int | None:
    """How many leading messages are already stored, or None when a stored one differs."""
    if not hashes:
        return 0
    stored = s.exec(
        select(col(Message.content_hash))
        .where(col(Message.session_id) == session_id)
        .order_by(col(Message.seq))
        .limit(len(hashes))
    )
    matched = 0
    for stored_hash, given_hash in zip(stored, hashes):
        if stored_hash != given_hash:
            return None
        matched += 1
    return matched


def _append(s: DBSession, row: Session, messages: list[ParsedMessage], hashes: list[str], raw: bool) -> None:
    now = utcnow()
    first_seq = row.last_seq + 1
    session_id = _id_of(row)
    said = [
        _message_row(session_id, first_seq + i, m, digest, now) for i, (m, digest) in enumerate(zip(messages, hashes))
    ]
    rows = said if raw else gate.ledger_batch(s, said)
    for batch in _batches(rows):
        gate.insert_messages(s, batch, raw=True)  # each row admitted above: the meter counts what is stored
    state = advance(MeterState.of(row), ((r["token_count"], r.get("meta")) for r in rows))
    gate.set_columns(row, state.columns())
    row.last_seq = first_seq + len(messages) - 1
    row.message_count += len(messages)
    row.rounds += sum(1 for m in messages if m.role == "user")
    row.updated_at = now
    s.add(row)
    s.flush()


def _message_row(session_id: int, seq: int, m: ParsedMessage, digest: str, now: datetime) -> dict[str, Any]:
    values: dict[str, Any] = {
        "session_id": session_id,
        "seq": seq,
        "role": m.role,
        "name": m.name,
        "content": m.content,
        "tool_call_id": m.tool_call_id,
        "content_hash": digest,
        "created_at": as_utc(m.created_at) if m.created_at else now,
        "token_count": count_tokens(m.content),
    }
    # JSON columns are left out rather than given None, so they hold SQL NULL, not JSON null.
    if m.tool_calls is not None:
        values["tool_calls"] = m.tool_calls
    if m.meta is not None:
        values["meta"] = m.meta
    return values


def _batches(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Runs of at most INSERT_BATCH rows sharing the same keys, in order."""
    batch: list[dict[str, Any]] = []
    for row in rows:
        if batch and (len(batch) >= INSERT_BATCH or row.keys() != batch[0].keys()):
            yield batch
            batch = []
        batch.append(row)
    if batch:
        yield batch


def _id_of(row: Session) -> int:
    """The id of a session row in the store (SQLModel types it optional, for rows not yet added)."""
    if row.id is None:
        raise ValueError("session row without an id")
    return row.id
