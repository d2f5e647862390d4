"""The admission gate: the only code that writes a column whose text can later be served.

Memories, daily notes, messages, experience entries and their fields, project state and its
evidence, and offloaded bodies are written here and nowhere else, whichever path brought them:
a dream pass, a flush, an agent over HTTP or MCP, a hook, an import, the Markdown read-back, the
inspector, code work, a team round or a compaction. Each text passes `dreamer.core.trust.admit`
(normalised, redacted, its trust decided with a reason), and a row found steering is stored
untrusted with that reason. `GATED` names the columns; `tests/test_gate.py` reads the package
and fails when any other module writes them.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, tzinfo
from typing import Any

from sqlalchemy import insert
from sqlmodel import Session as DBSession
from sqlmodel import SQLModel, col, select

from dreamer.core.consolidate import Evidence, content_hash, promoted_status
from dreamer.core.expiry import resolve_time
from dreamer.core.models import (
    ONLINE_KINDS,
    DailyNote,
    ExperienceEntry,
    Memory,
    MemoryEvent,
    Message,
    OffloadedBody,
    ProjectState,
    new_memory_id,
)
from dreamer.core.tokens import count_tokens
from dreamer.core.trust.admit import Writer, admit, admit_fields, admit_ledger

log = logging.getLogger(__name__)

# Every column whose text can come back into a model's context, per table.
GATED: dict[str, frozenset[str]] = {
    "memories": frozenset({"text"}),
    "daily_notes": frozenset({"text"}),
    "messages": frozenset({"content", "tool_calls"}),
    "experience_entries": frozenset(
        {"text", "conditions", "counterexamples", "unverified", "keywords", "note", "evidence"}
    ),
    "project_states": frozenset({"value", "evidence"}),
    "offloaded_bodies": frozenset({"body"}),
}
SOURCE_WRITERS: dict[str, Writer] = {"dream": "dream", "flush": "flush", "agent": "agent", "human": "person"}


def writer_of(source: str) -> Writer:
    """The writer a memory's `source` names (a team round's and a rule's memories are `dream`)."""
    return SOURCE_WRITERS.get(source, "import")


def memory_row(
    *,
    user_id: str,
    kind: str,
    text: str,
    source: str,
    evidence: list[Evidence],
    agent_id: str | None = None,
    project: str | None = None,
    team: str | None = None,
    importance: float = 0.5,
    tags: list[str] | None = None,
    untrusted: bool = False,
    memory_id: str | None = None,
    topic: str | None = None,
    cardinality: str | None = None,
    now: datetime,
    valid_from: datetime | None = None,
    tz: tzinfo = UTC,
    writer: Writer | None = None,
) -> dict[str, Any]:
    """Every column of a new memory row, waiting in the outbox, its text admitted (a steering
    text makes it untrusted); valid from when it was said (`valid_from`), else from `now`, and
    current until the day or period its text names is over in the user's time zone `tz`
    (`dreamer.core.expiry`; a daily note, the record of a day, never)."""
    got = admit(text, writer=writer or writer_of(source))
    untrusted = untrusted or got.untrusted
    return MemoryRow(
        {
            "id": memory_id or new_memory_id(),
            "user_id": user_id,
            "agent_id": agent_id,
            "project": project,
            "team": team,
            "kind": kind,
            "text": got.text,
            "content_hash": content_hash(got.text),
            "status": promoted_status("candidate", evidence, untrusted=untrusted),
            "source": source,
            "evidence": evidence,
            "tags": tags or [],
            "importance": importance,
            "untrusted": untrusted,
            "topic": topic,
            "cardinality": cardinality,
            "valid_until": valid_until_of(got.text, kind, valid_from or now, tz),
            **_fresh(valid_from or now, now),
        }
    )


def _fresh(valid_from: datetime, now: datetime) -> dict[str, Any]:
    """The times and links of a memory no change has touched yet, waiting in the outbox."""
    times = dict.fromkeys(("created_at", "updated_at", "last_seen"), now)
    return {"valid_from": valid_from, "valid_to": None, "superseded_by": None, "indexed_at": None, **times}


def _remade(row: dict[str, Any]) -> MemoryRow:
    return MemoryRow({**row, **_admitted_memory(row, writer_of(row.get("source", "")))})


def valid_until_of(text: str, kind: str, said: datetime, tz: tzinfo = UTC) -> datetime | None:
    """Until when a memory of `kind` saying `text`, said at `said`, is current (None: no end)."""
    expiry = None if kind in ONLINE_KINDS else resolve_time(text, said, tz)
    return expiry.until if expiry is not None else None


def new_memory(**row: Any) -> Memory:
    """A memory from a row `memory_row` made (its text is admitted again: a no-op for such a row)."""
    got = admit(row["text"], writer=writer_of(row.get("source", "")))
    row["untrusted"] = bool(row.get("untrusted")) or got.untrusted
    return Memory(**{**row, "text": got.text, "content_hash": content_hash(got.text)})


class MemoryRow(dict[str, Any]):
    """The columns of a new memory as `memory_row` made them: its text admitted."""


def insert_memories(s: DBSession, rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """New memories, then their events, as two statements in the caller's transaction; a row
    `memory_row` did not make is made by it first (its text admitted)."""
    rows = [r if isinstance(r, MemoryRow) else _remade(r) for r in rows]
    if rows:
        s.execute(insert(Memory.__table__), rows)  # type: ignore[attr-defined]  # SQLModel's stubs lack __table__
    if events:
        s.execute(insert(MemoryEvent.__table__), events)  # type: ignore[attr-defined]  # SQLModel's stubs lack __table__


def set_memory_text(m: Memory, text: str, *, writer: Writer = "person") -> str | None:
    """Give `m` a new text (a person's edit, a read-back, an accepted review), admitted: the
    text as stored, and `m` untrusted when it steers. Returns the steering reason, or None."""
    got = admit(text, writer=writer)
    m.text, m.content_hash = got.text, content_hash(got.text)
    if got.untrusted:
        m.untrusted = True
        if m.status == "verified":
            m.status = "review_required"
    return got.reason


def insert_messages(s: DBSession, rows: list[dict[str, Any]], *, raw: bool = False) -> None:
    """Messages of one batch as the ledger keeps them: each text and tool call's arguments
    redacted unless the store keeps raw messages (`store_raw_messages`)."""
    s.exec(insert(Message), params=rows if raw else ledger_batch(s, rows))


def ledger_batch(s: DBSession, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as the ledger keeps them (`ledger_row`), each read against the message just
    before it in its session: in the batch, or else the one stored, so an answer recorded in a
    later batch than its question ("What's the PIN?", "4417") loses its secret too."""
    said = {(r.get("session_id"), r.get("seq")): r["content"] for r in rows}
    out: list[dict[str, Any]] = []
    for row in rows:
        key = (row.get("session_id"), (row.get("seq") or 0) - 1)
        out.append(ledger_row(row, said[key] if key in said else _stored_before(s, row)))
    return out


def _stored_before(s: DBSession, row: dict[str, Any]) -> str | None:
    """The text of the message stored just before `row` in its session, or None."""
    session_id, seq = row.get("session_id"), row.get("seq") or 0
    if session_id is None or seq <= 1:
        return None
    query = select(col(Message.content)).where(col(Message.session_id) == session_id, col(Message.seq) == seq - 1)
    found: str | None = s.exec(query).one_or_none()
    return found


def ledger_row(row: dict[str, Any], asked: str | None = None) -> dict[str, Any]:
    """A message row with its secrets redacted (its hash, that of the message as said, kept), and
    with `asked`, the message before it, the secret it gives when that one asked for a secret;
    the row itself when it holds none, so a large import keeps one copy of each message."""
    content = admit_ledger(row["content"], asked)
    calls = row.get("tool_calls")
    kept_calls = [_ledger_call(c) for c in calls] if isinstance(calls, list) else calls
    if content == row["content"] and kept_calls == calls:
        return row
    out = {**row, "content": content, "token_count": count_tokens(content)}
    if calls is not None:
        out["tool_calls"] = kept_calls
    return out


def _ledger_call(call: Any) -> Any:
    if isinstance(call, dict) and isinstance(call.get("arguments"), str):
        return {**call, "arguments": admit_ledger(call["arguments"])}
    return call


def new_offload(*, body: str, raw: bool = False, **row: Any) -> OffloadedBody:
    """An offloaded body as it is kept: redacted as a message is, unless the store keeps raw ones."""
    return OffloadedBody(**row, body=body if raw else admit_ledger(body))


def new_note(*, text: str, writer: Writer = "flush", **row: Any) -> DailyNote:
    """A daily note's row, its text admitted as its memory's is."""
    return DailyNote(**row, text=admit(text, writer=writer).text)


ENTRY_FIELDS = ("text", "conditions", "counterexamples", "unverified", "keywords", "note", "evidence")


def new_entry(*, writer: Writer = "experience", **row: Any) -> ExperienceEntry:
    """An experience entry's row with every served field admitted; one that steers is untrusted,
    its note saying why."""
    fields, reason = admit_fields({k: row.pop(k) for k in ENTRY_FIELDS if k in row}, writer=writer)
    entry = ExperienceEntry(**row, **fields)
    if reason:
        _flag_entry(entry, reason)
    return entry


def set_entry(entry: ExperienceEntry, *, writer: Writer = "experience", **fields: Any) -> None:
    """Change served fields of an entry (its conditions, counterexamples ...), admitted."""
    unknown = set(fields) - set(ENTRY_FIELDS)
    if unknown:
        raise ValueError(f"not an entry's served field: {sorted(unknown)}")
    kept, reason = admit_fields(fields, writer=writer)
    for name, value in kept.items():
        setattr(entry, name, value)
    if reason:
        _flag_entry(entry, reason)


def _flag_entry(entry: ExperienceEntry, reason: str) -> None:
    log.info("experience entry stored untrusted (%s)", reason)
    entry.untrusted = True
    if not (entry.note or "").startswith("untrusted"):
        entry.note = f"untrusted: {reason}" + (f"; {entry.note}" if entry.note else "")


def new_state(**row: Any) -> ProjectState:
    """An empty project state field (its value and evidence are set by `set_state`)."""
    return ProjectState(**row)


def set_state(row: ProjectState, *, writer: Writer = "state", **fields: Any) -> str | None:
    """Give a state field its `value` and/or `evidence`, admitted; returns why it steers, or None
    (the caller says so in the field's reason)."""
    unknown = set(fields) - GATED["project_states"]
    if unknown:
        raise ValueError(f"not a state's served field: {sorted(unknown)}")
    kept, reason = admit_fields(fields, writer=writer)
    for name, value in kept.items():
        setattr(row, name, value)
    return reason


def imported(model: type[SQLModel], data: dict[str, Any]) -> Any:
    """A row of an import, through the gate when its table has served columns."""
    if model is Memory:
        return new_memory(**{**data, **_admitted_memory(data)})
    if model is DailyNote:
        return DailyNote(**{**data, "text": admit(data["text"], writer="import").text})
    if model is Message:
        return Message(**ledger_row(data))
    table = getattr(model, "__tablename__", "")
    if table in GATED:
        raise ValueError(f"no import path for {table}")
    return model(**data)


def _admitted_memory(data: dict[str, Any], writer: Writer = "import") -> dict[str, Any]:
    got = admit(data["text"], writer=writer)
    out: dict[str, Any] = {"text": got.text, "content_hash": content_hash(got.text)}
    if got.untrusted:
        out["untrusted"] = True
        if data.get("status") == "verified":
            out["status"] = "review_required"
    return out


def set_columns(row: SQLModel, values: dict[str, Any]) -> None:
    """Set columns of a row that no reader serves (a meter's counts, an undone change's status);
    a served column is refused: it has its own way through the gate."""
    served = GATED.get(getattr(row, "__tablename__", ""), frozenset()) & set(values)
    if served:
        raise ValueError(f"{sorted(served)} of {type(row).__name__} go through the gate's own writer")
    for name, value in values.items():
        setattr(row, name, value)
