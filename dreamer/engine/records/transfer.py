"""Export and import: the store as JSON lines, and back. One object a line, `{"type": ...}` first:
a header, then dream runs, (optionally) sessions with their cursor, messages and daily notes,
then memories, each with its history, and a trailer that counts the records. Every field and
every id is kept; only `indexed_at`, the index's bookkeeping, is left out: an imported memory
waits in the outbox, so the index and the Markdown follow. An import is a reader, not a back
door: every text passes the admission gate (`dreamer.store.gate`: normalised, redacted, a
steering one stored untrusted), every closed field is checked (statuses, kinds, sources, modes,
roles, scopes, times), and a file without its trailer, or with fewer records than it counts, is
refused whole.

Importing is idempotent and fits a live store: a run, session, message, note or memory already
there (by id, or a session by its user, source and external id) is left as it is; an id taken by
another record is given a new one (a session's new id is carried into its messages, notes and the
evidence of memories). One transaction: a line that cannot be read writes nothing; a dry run
(`dry_run`) counts what would be added and rolls back.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, text
from sqlalchemy.engine import Engine
from sqlmodel import Session as DBSession
from sqlmodel import SQLModel, col, select

from dreamer.core.errors import IngestError
from dreamer.core.models import KINDS as MEMORY_KINDS
from dreamer.core.models import (
    MODES,
    ROLES,
    STATUSES,
    Cursor,
    DailyNote,
    DreamRun,
    Memory,
    MemoryEvent,
    Message,
    Session,
)
from dreamer.store import gate
from dreamer.store.db import session_scope

FORMAT = "dreamer-export"
VERSION = 1
LEFT_OUT = {"indexed_at"}  # the index's bookkeeping: an imported memory is indexed again
KINDS = ("header", "run", "session", "message", "note", "memory", "trailer")
SOURCES = ("dream", "flush", "agent", "human")
# The values a record's field may hold, per table: anything else is refused with its line.
ALLOWED: dict[str, dict[str, tuple[str, ...]]] = {
    "memories": {"status": STATUSES, "kind": MEMORY_KINDS, "source": SOURCES},
    "sessions": {"mode": MODES},
    "messages": {"role": ROLES},
}
SCOPE_FIELDS = ("user_id", "agent_id", "project", "team")


# --- export -------------------------------------------------------------------------


def _json_value(v: Any) -> Any:
    if isinstance(v, datetime):
        return (v if v.tzinfo else v.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
    return v


def row_json(row: SQLModel) -> dict[str, Any]:
    """Every column of a row as JSON (times in UTC, ISO 8601)."""
    table = type(row).__table__  # type: ignore[attr-defined]  # SQLModel's stubs lack __table__
    return {c.name: _json_value(getattr(row, c.name)) for c in table.columns if c.name not in LEFT_OUT}


def export_records(engine: Engine, *, user_id: str | None = None, sessions: bool = False) -> Iterator[dict[str, Any]]:
    """The store (or one user's part of it) as export records, in import order."""
    yield {"type": "header", "format": FORMAT, "version": VERSION, "sessions": sessions, "user_id": user_id}
    with session_scope(engine) as s:
        mine = None if user_id is None else set(s.exec(select(Session.id).where(col(Session.user_id) == user_id)))
        for run in s.exec(select(DreamRun).order_by(col(DreamRun.id))):
            rec = {"type": "run", **row_json(run)}
            if mine is not None:  # another user's rejected candidates are theirs, not this export's
                rec["rejections"] = [
                    r for r in rec["rejections"] if isinstance(r, dict) and r.get("session_id") in mine
                ]
            yield rec
        if sessions:
            yield from _sessions(s, user_id)
        q = select(Memory).order_by(col(Memory.created_at), col(Memory.id))
        for m in s.exec(q if user_id is None else q.where(col(Memory.user_id) == user_id)):
            events = s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == m.id).order_by(col(MemoryEvent.id)))
            yield {"type": "memory", **row_json(m), "history": [row_json(e) for e in events]}


def with_trailer(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The records, then a trailer counting them (the header apart): a file cut short is known."""
    n = 0
    for rec in records:
        n += rec["type"] != "header"
        yield rec
    yield {"type": "trailer", "records": n}


def _sessions(s: DBSession, user_id: str | None) -> Iterator[dict[str, Any]]:
    q = select(Session).order_by(col(Session.id))
    for sess in s.exec(q if user_id is None else q.where(col(Session.user_id) == user_id)):
        cursor = s.get(Cursor, sess.id)
        yield {"type": "session", **row_json(sess), "cursor": row_json(cursor) if cursor else None}
        for msg in s.exec(select(Message).where(Message.session_id == sess.id).order_by(col(Message.seq))):
            yield {"type": "message", **row_json(msg)}
        for note in s.exec(select(DailyNote).where(DailyNote.session_id == sess.id).order_by(col(DailyNote.id))):
            yield {"type": "note", **row_json(note)}


def write_export(engine: Engine, out: Any, *, user_id: str | None = None, sessions: bool = False) -> dict[str, int]:
    """Write the export to a text stream; how many records of each type."""
    counts: dict[str, int] = {}
    for rec in with_trailer(export_records(engine, user_id=user_id, sessions=sessions)):
        out.write(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
        counts[rec["type"]] = counts.get(rec["type"], 0) + 1
    counts.pop("header", None)
    counts.pop("trailer", None)
    return counts


# --- import -------------------------------------------------------------------------


@dataclass
class Imported:
    """What an import added and what it found already there, by record type."""

    added: dict[str, int] = field(default_factory=dict)
    present: dict[str, int] = field(default_factory=dict)
    users: set[str] = field(default_factory=set)

    def count(self, kind: str, added: bool) -> None:
        into = self.added if added else self.present
        into[kind] = into.get(kind, 0) + 1

    def json(self) -> dict[str, Any]:
        return {"added": self.added, "present": self.present, "users": sorted(self.users)}


def read_records(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The records of an export, checked; an unreadable line is an error naming it."""
    records = []
    for no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise IngestError(f"line {no}: not JSON ({exc.msg})") from None
        if not isinstance(rec, dict) or rec.get("type") not in KINDS:
            raise IngestError(f"line {no}: not a record of a dreamer export (type must be one of {', '.join(KINDS)})")
        if rec["type"] == "header" and (rec.get("format") != FORMAT or rec.get("version") != VERSION):
            raise IngestError(f"line {no}: not a {FORMAT} of version {VERSION}")
        records.append(rec | {"_line": no})
    if not records or records[0]["type"] != "header":
        raise IngestError(f"not a {FORMAT}: the first line must be its header")
    _check_trailer(records)
    return records[:-1]


def _check_trailer(records: list[dict[str, Any]]) -> None:
    """A whole export ends with its trailer, which counts the records before it (the header apart)."""
    last = records[-1]
    if last["type"] != "trailer":
        raise IngestError(f"the export is cut short: no trailer after line {last['_line']}; nothing was imported")
    body = [r for r in records[1:-1] if r["type"] in ("header", "trailer")]
    if body:
        raise IngestError(f"line {body[0]['_line']}: a {body[0]['type']} inside the export")
    if last.get("records") != len(records) - 2:
        raise IngestError(
            f"line {last['_line']}: the trailer counts {last.get('records')!r} record(s), the file holds "
            f"{len(records) - 2}; nothing was imported"
        )


def _is_time(kind: Any) -> bool:
    """A column of times: SQLAlchemy's own, or a decorator of it (SQLModel's UTC times)."""
    return isinstance(kind, DateTime) or isinstance(getattr(kind, "impl", None), DateTime)


def _row(model: type[SQLModel], rec: dict[str, Any], **changes: Any) -> Any:
    """A row of `model` from a record's fields (times parsed); unknown fields are an error."""
    table = model.__table__  # type: ignore[attr-defined]  # SQLModel's stubs lack __table__
    columns = {c.name: c for c in table.columns}
    data = {k: v for k, v in rec.items() if k not in ("type", "_line", "history", "cursor")}
    unknown = sorted(set(data) - set(columns))
    if unknown:
        raise IngestError(f"line {rec.get('_line')}: unknown field(s) of a {rec['type']}: {', '.join(unknown)}")
    for k, v in data.items():
        if isinstance(v, str) and _is_time(columns[k].type):
            try:
                data[k] = datetime.fromisoformat(v)
            except ValueError:
                raise IngestError(f"line {rec.get('_line')}: {k} is not a time: {v!r}") from None
    _check_values(table.name, data, rec.get("_line"))
    return gate.imported(model, data | changes)


def _check_values(table: str, data: dict[str, Any], line: Any) -> None:
    """Each field of a closed set holds one of its values; a scope is text (the user's never empty)."""
    for name, allowed in ALLOWED.get(table, {}).items():
        if name in data and data[name] not in allowed:
            raise IngestError(f"line {line}: {name} {data[name]!r} is not one of {', '.join(allowed)}")
    for name in SCOPE_FIELDS:
        value = data.get(name)
        if name in data and not (isinstance(value, str) or (value is None and name != "user_id")):
            raise IngestError(f"line {line}: {name} must be text, not {value!r}")
    if "user_id" in data and not str(data["user_id"]).strip():
        raise IngestError(f"line {line}: user_id is empty")


@dataclass
class _Ids:
    """Ids an import gave anew, because the export's were taken by other records."""

    sessions: dict[int, int] = field(default_factory=dict)

    def session(self, old: Any) -> Any:
        return self.sessions.get(old, old) if isinstance(old, int) else old


class _DryRun(Exception):
    """Raised inside a dry import's transaction so that it rolls back."""


def import_records(
    engine: Engine, records: list[dict[str, Any]], *, on_record: Callable[[], None] | None = None, dry_run: bool = False
) -> Imported:
    """Import checked records (`read_records`) in one transaction; with `dry_run`, say what
    would be added and what is there already, and roll it back (nothing changes)."""
    result, ids = Imported(), _Ids()
    try:
        with session_scope(engine) as s:
            for rec in records:
                kind = rec["type"]
                if kind != "header":
                    added = _IMPORTERS[kind](s, rec, ids, result)
                    result.count(kind, added)
                    s.flush()  # in file order: a row exists before the rows that point at it
                if on_record is not None:
                    on_record()
            if dry_run:
                raise _DryRun
            _advance_sequences(s)
    except _DryRun:
        pass
    return result


def _import_run(s: DBSession, rec: dict[str, Any], ids: _Ids, result: Imported) -> bool:
    if s.get(DreamRun, rec.get("id")) is not None:
        return False
    s.add(_row(DreamRun, rec))
    return True


def _import_session(s: DBSession, rec: dict[str, Any], ids: _Ids, result: Imported) -> bool:
    key = (rec.get("user_id"), rec.get("source"), rec.get("external_id"))
    q = select(Session).where(Session.user_id == key[0], Session.source == key[1], Session.external_id == key[2])
    found = s.exec(q).first()
    if found is not None:
        ids.sessions[rec["id"]] = found.id or 0
        return False
    free = s.get(Session, rec.get("id")) is None
    sess = _row(Session, rec) if free else _row(Session, rec, id=None)
    s.add(sess)
    s.flush()
    ids.sessions[rec["id"]] = sess.id
    if rec.get("cursor"):
        s.add(_row(Cursor, {"type": "cursor", **rec["cursor"]}, session_id=sess.id))
    result.users.add(sess.user_id)
    return True


def _import_message(s: DBSession, rec: dict[str, Any], ids: _Ids, result: Imported) -> bool:
    sid = ids.session(rec.get("session_id"))
    if s.exec(select(Message.id).where(Message.session_id == sid, Message.seq == rec.get("seq"))).first() is not None:
        return False
    free = s.get(Message, rec.get("id")) is None
    s.add(_row(Message, rec, session_id=sid) if free else _row(Message, rec, session_id=sid, id=None))
    return True


def _import_note(s: DBSession, rec: dict[str, Any], ids: _Ids, result: Imported) -> bool:
    sid = ids.session(rec.get("session_id"))
    q = select(DailyNote.id).where(
        DailyNote.session_id == sid,
        DailyNote.window_end_seq == rec.get("window_end_seq"),
        DailyNote.position == rec.get("position"),
    )
    if s.exec(q).first() is not None:
        return False
    free = s.get(DailyNote, rec.get("id")) is None
    s.add(_row(DailyNote, rec, session_id=sid) if free else _row(DailyNote, rec, session_id=sid, id=None))
    return True


def _import_memory(s: DBSession, rec: dict[str, Any], ids: _Ids, result: Imported) -> bool:
    if s.get(Memory, rec.get("id")) is not None:
        return False
    evidence = [
        {**e, "session_id": ids.session(e.get("session_id"))} if isinstance(e, dict) and "session_id" in e else e
        for e in rec.get("evidence") or []
    ]
    m = _row(Memory, rec, evidence=evidence, indexed_at=None)  # waits in the outbox: the index follows
    s.add(m)
    s.flush()
    for event in rec.get("history") or []:
        line = {"type": "memory event", "_line": rec.get("_line"), **event}
        run = event.get("run_id")
        run_id = run if run is None or s.get(DreamRun, run) is not None else None
        free = s.get(MemoryEvent, event.get("id")) is None
        s.add(_row(MemoryEvent, line, memory_id=m.id, run_id=run_id, **({} if free else {"id": None})))
    result.users.add(m.user_id)
    return True


_IMPORTERS: dict[str, Callable[[DBSession, dict[str, Any], _Ids, Imported], bool]] = {
    "run": _import_run,
    "session": _import_session,
    "message": _import_message,
    "note": _import_note,
    "memory": _import_memory,
}
_SEQUENCED = ("sessions", "messages", "memory_events", "dream_runs", "daily_notes")


def _advance_sequences(s: DBSession) -> None:
    """PostgreSQL: the id sequences past the ids an import wrote (SQLite needs nothing)."""
    if s.get_bind().dialect.name != "postgresql":
        return
    for table in _SEQUENCED:
        s.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                f"GREATEST((SELECT COALESCE(MAX(id), 0) FROM {table}), 1))"
            )
        )
