"""Importing whole transcript files: parse, resolve each session's owner, store per file."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from dreamer.core.errors import IngestError
from dreamer.ingest.base import DEFAULT_MAX_MESSAGE_BYTES, ParsedSession, ParseResult, Rejection
from dreamer.ingest.detect import PARSERS, resolve_format
from dreamer.ingest.store import CHANGED_REASON, RecordResult, SessionTarget, record_session, session_target
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

CODE_FORMATS = ("claude-code",)
REJECTIONS_SHOWN = 10  # a file's rejections printed one by one; the rest are counted


@dataclass
class FileReport:
    path: str
    format: str
    sessions: list[RecordResult] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)

    @property
    def added(self) -> int:
        return sum(r.added for r in self.sessions)

    @property
    def skipped(self) -> int:
        return sum(r.skipped for r in self.sessions)

    def rejection_lines(self, shown: int = REJECTIONS_SHOWN) -> list[str]:
        """The file's rejections as printed: "rejected <where>: <reason>" for the first `shown`,
        then one line counting the rest (a binary file is rejected line by line)."""
        lines = [f"rejected {r}" for r in self.rejections[:shown]]
        more = len(self.rejections) - shown
        if more > 0:
            lines.append(f"{self.path}: and {more} more rejected")
        return lines


def ingest_file(engine: Engine, path: Path, *, raw: bool = False, **options: Any) -> FileReport:
    """Parse one file (`options` as `plan_file` takes them) and store all its sessions in one
    transaction (their secrets redacted unless `raw`)."""
    return _store_file(engine, plan_file(path, **options), raw)


@dataclass
class PlannedFile:
    """A parsed file with the session each of its parsed sessions goes to; nothing stored yet."""

    path: Path
    format: str
    parsed: ParseResult
    targets: list[SessionTarget]


def plan_file(
    path: Path,
    *,
    fmt: str = "auto",
    user_id: str | None,
    agent_id: str | None = None,
    project: str | None = None,
    team: str | None = None,
    mode: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> PlannedFile:
    """Parse a file and resolve its sessions' owners, writing nothing: `IngestError` for a file
    that cannot be imported as asked. The importer's user id (LoCoMo) and project (Claude Code,
    OpenClaw) fill in for None arguments; `mode` None means ``code`` for Claude Code and
    ``agent`` otherwise."""
    path = Path(path)
    name = resolve_format(path, fmt)
    parsed = PARSERS[name](path, max_message_bytes=max_message_bytes)
    targets = [_parsed_target(ps, name, user_id, agent_id, project, team, mode, path) for ps in parsed.sessions]
    return PlannedFile(path, name, parsed, targets)


def store_files(engine: Engine, files: Sequence[PlannedFile], *, raw: bool = False) -> list[FileReport]:
    """Store the planned files' sessions, each file in one transaction (a write lock held for one
    file at a time; storing a file again adds only what it lacks); secrets redacted unless `raw`."""
    return [_store_file(engine, f, raw) for f in files]


def _store_file(engine: Engine, f: PlannedFile, raw: bool) -> FileReport:
    report = FileReport(path=str(f.path), format=f.format, rejections=list(f.parsed.rejections))
    with session_scope(engine) as s:
        for ps, target in zip(f.parsed.sessions, f.targets):
            result = record_session(s, target, ps.messages, raw=raw)
            report.sessions.append(result)
            if result.changed:
                report.rejections.append(Rejection(str(f.path), None, f"session {ps.external_id}: {CHANGED_REASON}"))
    log.info(
        "ingested %s (%s): %d sessions, %d messages added, %d already stored, %d rejections",
        f.path,
        f.format,
        len(report.sessions),
        report.added,
        report.skipped,
        len(report.rejections),
    )
    return report


def _parsed_target(
    ps: ParsedSession,
    fmt: str,
    user_id: str | None,
    agent_id: str | None,
    project: str | None,
    team: str | None,
    mode: str | None,
    path: Path,
) -> SessionTarget:
    owner = user_id if user_id is not None else ps.user_id
    if owner is None:
        raise IngestError(f"{path}: no user id given and the {fmt} format does not carry one")
    return session_target(
        ps.external_id,
        owner,
        ps.source or fmt,
        agent_id,
        project if project is not None else ps.project,
        team,
        mode or ("code" if fmt in CODE_FORMATS else "agent"),
        ps.title,
        ps.created_at,
    )
