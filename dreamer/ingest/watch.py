"""Watched transcript files: each read only when it changed, what it gained stored once.

A file's row in `watched_files` keeps how far it was read (`offset_bytes`, the end of its last
complete line), the sha256 of those bytes, and its size and modification time when read. A file
whose size and time are unchanged is not opened. One that grew and still starts with the bytes
read before was appended to: it is imported again and the store adds only the messages past
those it holds (a line still being written, without its line break, waits for the next read). One
that is shorter than what was read, or whose first bytes differ, was truncated or rewritten:
that is said (logged and kept as the file's problem) and the file is imported again, which adds
what is new and leaves a session whose earlier messages changed untouched (`CHANGED_REASON`).

The watched folders are the `sources` setting; hooks watch a single transcript the same way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from dreamer.core.errors import ConfigError, DreamerError, os_reason, validation_summary
from dreamer.core.models import WatchedFile, utcnow
from dreamer.core.settings import Settings
from dreamer.ingest.base import DEFAULT_MAX_MESSAGE_BYTES, Rejection
from dreamer.ingest.detect import FORMATS
from dreamer.ingest.files import FileReport, plan_file, store_files
from dreamer.ingest.store import CHANGED_REASON
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

Status = Literal["unchanged", "new", "appended", "truncated", "rewritten", "missing", "failed"]
DEFAULT_PATTERNS = {"locomo": "*.json"}  # every other format: "**/*.jsonl"
PROBLEMS_SHOWN = 3


class Source(BaseModel):
    """One watched folder: its transcripts' format and whose sessions they are."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(min_length=1)
    format: Literal[FORMATS]  # type: ignore[valid-type]
    user_id: str = Field(min_length=1, max_length=255)
    agent_id: str | None = Field(None, min_length=1, max_length=255)
    team: str | None = Field(None, min_length=1, max_length=255)
    pattern: str | None = Field(None, min_length=1, description="glob under path; default **/*.jsonl")

    @property
    def folder(self) -> Path:
        return Path(os.path.expanduser(self.path))

    @property
    def glob(self) -> str:
        return self.pattern or DEFAULT_PATTERNS.get(self.format, "**/*.jsonl")

    def files(self) -> list[Path]:
        """The regular files of the folder its pattern names, in name order."""
        return sorted(p for p in self.folder.glob(self.glob) if p.is_file())


def parse_sources(raw: str) -> list[Source]:
    """The watched folders of the `sources` setting (a JSON list); ConfigError for anything malformed."""
    if not raw or not raw.strip():
        return []
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"DREAMER_SOURCES is not valid JSON: {exc.msg} at position {exc.pos}") from exc
    if not isinstance(data, list):
        raise ConfigError('DREAMER_SOURCES must be a JSON list of {"path", "format", "user_id", ...} objects')
    sources = []
    for i, item in enumerate(data):
        try:
            sources.append(Source.model_validate(item))
        except ValidationError as exc:
            raise ConfigError(f"DREAMER_SOURCES entry {i}: {validation_summary(exc)}") from exc
    return sources


@dataclass
class Outcome:
    """What reading one watched file did."""

    path: str
    status: Status
    added: int = 0
    problem: str | None = None
    sessions: list[str] = field(default_factory=list)  # external ids of the sessions it holds


@dataclass(frozen=True)
class Owner:
    """Whose sessions a watched file's transcripts become."""

    user_id: str
    agent_id: str | None = None
    team: str | None = None


def path_key(path: Path) -> str:
    return hashlib.sha256(str(path).encode("utf-8", "surrogateescape")).hexdigest()


def watch_file(
    engine: Engine, path: Path, fmt: str, owner: Owner, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
) -> Outcome:
    """Read what `path` gained since it was last read, and store it (see the module's doc)."""
    path = Path(os.path.abspath(os.path.expanduser(path)))
    key = path_key(path)
    with session_scope(engine) as s:
        row = s.get(WatchedFile, key)
    try:
        st = path.stat()
    except OSError as exc:
        return _record_missing(engine, key, path, fmt, owner, os_reason(exc))
    if row is not None and (row.size_bytes, row.mtime_ns) == (st.st_size, st.st_mtime_ns):
        _touch(engine, key)
        return Outcome(str(path), "unchanged")
    data = path.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    status = _status(row, data)
    if status in ("truncated", "rewritten"):
        log.warning("%s was %s since it was last read: reading it again", path, status)
    planned = plan_file(
        path,
        fmt=fmt,
        user_id=owner.user_id,
        agent_id=owner.agent_id,
        team=owner.team,
        max_message_bytes=max_message_bytes,
    )
    [report] = store_files(engine, [planned])
    problem = _problem(status, report, partial_line=_partial_line(data))
    seen = _Seen(len(complete), len(data), st.st_mtime_ns, hashlib.sha256(complete).hexdigest())
    _record(engine, key, path, fmt, owner, report, seen, problem)
    return Outcome(str(path), status, report.added, problem, [r.external_id for r in report.sessions])


@dataclass(frozen=True)
class _Seen:
    offset: int
    size: int
    mtime_ns: int
    head_hash: str


def _status(row: WatchedFile | None, data: bytes) -> Status:
    if row is None or row.offset_bytes == 0:
        return "new"
    if len(data) < row.offset_bytes:
        return "truncated"
    if hashlib.sha256(data[: row.offset_bytes]).hexdigest() != row.head_hash:
        return "rewritten"
    return "appended"


def _partial_line(data: bytes) -> int | None:
    """The number of a last line still being written (no line break yet), else None."""
    if not data or data.endswith(b"\n") or not data.strip():
        return None
    return data.count(b"\n") + 1


def _problem(status: Status, report: FileReport, *, partial_line: int | None) -> str | None:
    """One line: what was wrong with the file as read now (None when nothing was)."""
    parts = []
    if status in ("truncated", "rewritten"):
        parts.append(f"{status} since it was last read, so read again from its start")
    rejected = [r for r in report.rejections if not (r.line is not None and r.line == partial_line)]
    changed = [r for r in rejected if CHANGED_REASON in r.reason]
    if changed:
        parts.append(f"{len(changed)} session(s) whose earlier messages changed were left as stored")
    others = [r for r in rejected if r not in changed]
    if others:
        shown = "; ".join(_where(r) for r in others[:PROBLEMS_SHOWN])
        more = f" (and {len(others) - PROBLEMS_SHOWN} more)" if len(others) > PROBLEMS_SHOWN else ""
        parts.append(f"{len(others)} line(s) rejected: {shown}{more}")
    return "; ".join(parts) or None


def _where(r: Rejection) -> str:
    return f"line {r.line}: {r.reason}" if r.line is not None else r.reason


def _record(
    engine: Engine,
    key: str,
    path: Path,
    fmt: str,
    owner: Owner,
    report: FileReport,
    seen: _Seen,
    problem: str | None,
) -> None:
    now = utcnow()
    with session_scope(engine) as s:
        row = s.get(WatchedFile, key) or WatchedFile(path_key=key, path=str(path), format=fmt, user_id=owner.user_id)
        row.format, row.user_id = fmt, owner.user_id
        row.offset_bytes, row.size_bytes, row.mtime_ns, row.head_hash = (
            seen.offset,
            seen.size,
            seen.mtime_ns,
            seen.head_hash,
        )
        row.messages += report.added
        row.sessions = len(report.sessions)
        row.last_seen_at, row.problem = now, problem
        if report.added:
            row.ingested_at = now
        s.add(row)


def _record_missing(engine: Engine, key: str, path: Path, fmt: str, owner: Owner, reason: str) -> Outcome:
    """A file that could not be read: said on its row, whose size is unknown so that it is read
    again once it can be."""
    problem = f"cannot be read: {reason}"
    with session_scope(engine) as s:
        row = s.get(WatchedFile, key) or WatchedFile(path_key=key, path=str(path), format=fmt, user_id=owner.user_id)
        row.problem, row.size_bytes, row.last_seen_at = problem, -1, utcnow()
        s.add(row)
    return Outcome(str(path), "missing", problem=problem)


def _touch(engine: Engine, key: str) -> None:
    with session_scope(engine) as s:
        row = s.get(WatchedFile, key)
        if row is not None:
            row.last_seen_at = utcnow()
            s.add(row)


def ingest_sources(engine: Engine, settings: Settings) -> list[Outcome]:
    """Read every watched folder's files (what changed since the last read); a file that fails is
    recorded and logged in one line, and the others go on."""
    outcomes: list[Outcome] = []
    for source in parse_sources(settings.sources):
        if not source.folder.is_dir():
            log.warning("watched folder %s is not a folder (or is missing)", source.folder)
            continue
        owner = Owner(source.user_id, source.agent_id, source.team)
        for path in source.files():
            outcomes.append(_watch_safely(engine, path, source.format, owner, settings.max_message_bytes))
    if outcomes:
        added = sum(o.added for o in outcomes)
        log.info("watched sources: %d file(s) looked at, %d message(s) added", len(outcomes), added)
    return outcomes


def _watch_safely(engine: Engine, path: Path, fmt: str, owner: Owner, max_message_bytes: int) -> Outcome:
    try:
        return watch_file(engine, path, fmt, owner, max_message_bytes=max_message_bytes)
    except (DreamerError, OSError) as exc:
        reason = os_reason(exc) if isinstance(exc, OSError) else str(exc)
        log.warning("watched file %s: %s", path, reason)
        return _record_missing(engine, path_key(Path(os.path.abspath(path))), path, fmt, owner, reason)


@dataclass
class FileState:
    """A watched file as `dreamer sources ls` shows it."""

    path: str
    format: str
    user_id: str
    offset_bytes: int
    size_bytes: int
    messages: int
    sessions: int
    last_seen_at: datetime
    ingested_at: datetime | None
    problem: str | None


def file_states(engine: Engine, under: Path | None = None) -> list[FileState]:
    """The watched files recorded (those under a folder when given), by path."""
    with session_scope(engine) as s:
        rows = s.exec(select(WatchedFile).order_by(col(WatchedFile.path))).all()
    prefix = str(Path(os.path.abspath(under))) + os.sep if under is not None else ""
    return [
        FileState(
            r.path,
            r.format,
            r.user_id,
            r.offset_bytes,
            r.size_bytes,
            r.messages,
            r.sessions,
            r.last_seen_at,
            r.ingested_at,
            r.problem,
        )
        for r in rows
        if r.path.startswith(prefix)
    ]


__all__ = ["Outcome", "Owner", "Source", "file_states", "ingest_sources", "parse_sources", "watch_file"]
