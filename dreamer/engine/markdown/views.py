"""The human view: Markdown files per user under the workspace folder.

Layout of one user's folder (``user_dir``)::

    MEMORY.md              verified memories, grouped by kind
    USER.md                profile memories and verified preferences
    DREAMS.md              agent-mode memories, ranked, at most ``dreams_cap``
    DREAMS.archive.md      the ranked rest, so nothing is lost
    coding/<project>.md    code-mode memories of one project, grouped by kind
    teams/<team>.md        the memory of one team, under its four tags
    memory/YYYY-MM-DD.md   daily notes, append only

This module names and writes the files; what goes in them is `dreamer.engine.markdown.render`'s,
and the entry line each memory is written as (and read back from) `dreamer.engine.markdown.entries`'.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import socket
import tempfile
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from dreamer.core.private import private_dir, private_file
from dreamer.engine.markdown.entries import bullet, parse_entries
from dreamer.store.leases import pid_alive

log = logging.getLogger(__name__)

MEMORY_FILE = "MEMORY.md"
USER_FILE = "USER.md"
DREAMS_FILE = "DREAMS.md"
DREAMS_ARCHIVE_FILE = "DREAMS.archive.md"
CODING_DIR = "coding"
TEAMS_DIR = "teams"
DAILY_DIR = "memory"
UNSCOPED_PROJECT_FILE = "_unscoped.md"

_SLUG_MAX = 40
_HASH_HEX = 12
_DAY_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ID_RE = re.compile(r"^[A-Za-z0-9_.:\-]{1,128}$")
_HOST = re.sub(r"[^A-Za-z0-9_-]", "-", socket.gethostname()) or "host"
_TEMP_RE = re.compile(r"\.(?P<file>.+)\.(?P<host>[A-Za-z0-9_-]+)~(?P<pid>\d+)\.[^.]+\.tmp")


# --- safe names -----------------------------------------------------------------------


def safe_name(s: str) -> str:
    """A folder or file stem for any string: ``<slug>-<12 hex of sha256>``.

    The slug keeps ``[a-z0-9_-]`` (at most 40 characters) so the name stays readable; the
    hash of the exact string keeps distinct strings apart, also on case-insensitive
    filesystems. The result never contains a separator, a dot or a NUL.
    """
    digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_HEX]
    slug = re.sub(r"[^a-z0-9_-]+", "-", s.lower())
    slug = re.sub(r"-{2,}", "-", slug).strip("-_")[:_SLUG_MAX].strip("-_")
    return f"{slug or 'x'}-{digest}"


def user_dir(workspace: Path, user_id: str) -> Path:
    """The folder of one user's files, always a direct child of ``workspace``."""
    return Path(workspace) / safe_name(user_id)


@dataclass(frozen=True)
class RenderedFile:
    """One file of a view, as it should be on disk."""

    path: Path
    content: str


# --- writing --------------------------------------------------------------------------


RENDER_LOCK = ".render.lock"


@contextmanager
def render_lock(folder: Path) -> Iterator[None]:
    """Hold the render lock of a user's folder: one renderer at a time, across processes."""
    private_dir(folder)
    fd = os.open(folder / RENDER_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes, *, sync_dir: bool = True) -> bool:
    """Write ``data`` to ``path`` through a temp file and `os.replace`; False if unchanged.
    Without `sync_dir`, the caller fsyncs the folder (to make the rename durable) itself."""
    path = Path(path)
    try:
        if path.read_bytes() == data:
            return False
        mode: int | None = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{_HOST}~{os.getpid()}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync_dir:
        _fsync_dir(path.parent)
    return True


def remove_orphaned_temps(folder: Path) -> int:
    """Delete temp files a writer on this host left behind when it died before its rename.

    A temp file is named ``.<file>.<host>~<pid>.<random>.tmp``; it is an orphan when the host
    is this one and no process with that pid is alive. Returns how many were removed."""
    removed = 0
    for tmp in Path(folder).glob(".*.tmp"):
        m = _TEMP_RE.fullmatch(tmp.name)
        if m is None or m.group("host") != _HOST or pid_alive(int(m.group("pid"))):
            continue
        try:
            tmp.unlink()
            removed += 1
        except FileNotFoundError:
            continue
    if removed:
        log.info("removed %d orphaned temp files in %s", removed, folder)
    return removed


def write_files(files: list[RenderedFile]) -> None:
    """Write each file atomically; a file whose content did not change is left untouched."""
    folders = sorted({f.path.parent for f in files})
    for folder in folders:
        if folder.is_dir():
            remove_orphaned_temps(folder)
    changed = {f.path.parent for f in files if write_atomic(f.path, f.content.encode("utf-8"), sync_dir=False)}
    for folder in sorted(changed):  # one fsync per folder makes all its renames durable
        _fsync_dir(folder)
    log.debug("wrote files in %d of %d folders", len(changed), len(folders))


# --- daily notes ----------------------------------------------------------------------


def _check_day(day: str) -> None:
    if not _DAY_RE.fullmatch(day):
        raise ValueError(f"day must be YYYY-MM-DD: {day!r}")
    date.fromisoformat(day)


def daily_note_line(memory_id: str, text: str) -> str:
    return bullet(text, 0, f"id:{memory_id} kind:daily_note")


def _new_notes(notes: list[tuple[str, str]], seen: set[str]) -> list[str]:
    """Lines for the notes whose id is not in ``seen`` (updated), in the given order."""
    lines: list[str] = []
    for memory_id, text in notes:
        if not _ID_RE.fullmatch(memory_id or ""):
            log.warning("daily note with unusable id %r skipped", memory_id)
            continue
        if memory_id in seen:
            continue
        seen.add(memory_id)
        lines.append(daily_note_line(memory_id, text))
    return lines


def append_daily_note(workspace: Path, user_id: str, day: str, notes: list[tuple[str, str]]) -> Path:
    """Append notes to ``memory/<day>.md`` (created with a heading); ids already there are skipped."""
    _check_day(day)
    path = user_dir(workspace, user_id) / DAILY_DIR / f"{day}.md"
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = _new_notes(notes, {e.memory_id for e in parse_entries(existing)})
    if not lines:
        return path
    chunk = "\n".join(lines) + "\n"
    if not existing:
        chunk = f"# Daily notes {day}\n\n" + chunk
    elif not existing.endswith("\n"):
        chunk = "\n" + chunk
    private_file(private_dir(path.parent) / path.name)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    log.debug("appended %d daily notes to %s", len(lines), path.name)
    return path


# --- erasing --------------------------------------------------------------------------


def entries_held(folder: Path, memory_ids: Collection[str] | None = None) -> dict[str, int]:
    """Each Markdown file of a user's folder (relative to it) that shows entries of these
    memories (None: of any), with how many."""
    held: dict[str, int] = {}
    for path in sorted(folder.rglob("*.md")) if folder.is_dir() else []:
        entries = parse_entries(path.read_text(encoding="utf-8", errors="replace"))
        n = sum(1 for e in entries if memory_ids is None or e.memory_id in memory_ids)
        if n:
            held[path.relative_to(folder).as_posix()] = n
    return held


def drop_daily_notes(workspace: Path, user_id: str, memory_ids: Collection[str]) -> int:
    """Take these memories' lines out of a user's daily-note files (which otherwise only grow);
    a file left without notes goes. Returns how many lines went."""
    folder = user_dir(workspace, user_id) / DAILY_DIR
    removed = 0
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines(keepends=True)
        kept = [ln for ln in lines if not any(e.memory_id in memory_ids for e in parse_entries(ln))]
        if len(kept) == len(lines):
            continue
        removed += len(lines) - len(kept)
        if parse_entries("".join(kept)):
            write_atomic(path, "".join(kept).encode("utf-8"))
        else:
            path.unlink()
    return removed
