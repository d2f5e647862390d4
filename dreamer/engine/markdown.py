"""The human view: Markdown files per user under the workspace folder.

Layout of one user's folder (``user_dir``)::

    MEMORY.md              verified memories, grouped by kind
    USER.md                profile memories and verified preferences
    DREAMS.md              agent-mode memories, ranked, at most ``dreams_cap``
    DREAMS.archive.md      the ranked rest, so nothing is lost
    coding/<project>.md    code-mode memories of one project, grouped by kind
    memory/YYYY-MM-DD.md   daily notes, append only

Each entry is one bullet line ending in ``<!-- id:<id> kind:<kind> status:<status> -->`` so a
person's edits to the text can be matched back to the memory (`parse_entries`).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import logging
import os
import re
import socket
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path

from dreamer.core.models import AGENT_KINDS, CODE_KINDS, CURRENT_STATUSES, KINDS, Memory
from dreamer.core.redact import redact

log = logging.getLogger(__name__)

MEMORY_FILE = "MEMORY.md"
USER_FILE = "USER.md"
DREAMS_FILE = "DREAMS.md"
DREAMS_ARCHIVE_FILE = "DREAMS.archive.md"
CODING_DIR = "coding"
DAILY_DIR = "memory"
UNSCOPED_PROJECT_FILE = "_unscoped.md"

NOTE = (
    "_Each entry carries its memory id in a trailing comment; keep the comment when you edit "
    "a line, so the entry can still be matched to its record._"
)
EMPTY = "_No entries._"

KIND_TITLES = {
    "preference": "Preferences",
    "profile": "Profile",
    "focus": "Focus",
    "root_cause": "Root causes",
    "interface_behavior": "Interface behavior",
    "design_decision": "Design decisions",
    "daily_note": "Daily notes",
    "decision": "Decisions",
    "lesson": "Lessons",
    "expertise": "Expertise",
    "context": "Context",
}

_SLUG_MAX = 40
_HASH_HEX = 12
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
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


# --- entries --------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One bullet read back from a file."""

    memory_id: str
    text: str
    kind: str | None = None
    status: str | None = None


@dataclass(frozen=True)
class RenderedFile:
    path: Path
    content: str


_ESCAPE_RE = re.compile(r"&(?=(?:amp;)*(?:lt;!--|gt;))|<!--|-->")
_UNESCAPE_RE = re.compile(r"&((?:amp;)*)(lt;!--|gt;)")
_SESSIONS_RE = re.compile(r"\s*\((\d+) sessions?\)$")
_ENTRY_RE = re.compile(r"^\s*[-*+][ \t]+(?P<body>.*?)[ \t]*<!--(?P<meta>(?:(?!-->).)*)-->\s*$")
_META_RE = re.compile(r"([A-Za-z_]+):(\S+)")


def escape_text(text: str) -> str:
    """One line, with ``<!--`` and ``-->`` written as entities (reversible by `unescape_text`)."""
    line = " ".join(text.splitlines()).strip()

    def sub(m: re.Match[str]) -> str:
        s = m.group(0)
        if s == "&":
            return "&amp;"
        return "&lt;!--" if s == "<!--" else "--&gt;"

    return _ESCAPE_RE.sub(sub, line)


def unescape_text(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        amps, tail = m.group(1), m.group(2)
        if amps:
            return "&" + amps[len("amp;") :] + tail
        return "<!--" if tail == "lt;!--" else ">"

    return _UNESCAPE_RE.sub(sub, text)


def session_count(memory: Memory) -> int:
    """How many distinct sessions the memory's evidence points at."""
    seen: set[str] = set()
    for item in memory.evidence or []:
        if isinstance(item, dict):
            key = item.get("session_id", item.get("session", item.get("external_id")))
            seen.add(repr(key if key is not None else sorted(item.items(), key=str)))
        else:
            seen.add(repr(item))
    return len(seen)


@functools.lru_cache(maxsize=1 << 15)
def _shown(text: str) -> str:
    """A memory's text as a file shows it: secrets redacted, Markdown escaped. Every render of a
    user's files shows every memory again, so each text is worked out once."""
    return escape_text(redact(text))


def _bullet(text: str, sessions: int, meta: str) -> str:
    """``- <text> [(N sessions)] <!-- <meta> -->``; the count shows from two sessions up.

    It also shows when the text itself ends like a count, so `parse_entries` always strips
    exactly the one that was added.
    """
    body = _shown(text)
    if sessions >= 2 or _SESSIONS_RE.search(body):
        body = f"{body} ({sessions} session{'' if sessions == 1 else 's'})".lstrip()
    return f"- {body} <!-- {meta} -->" if body else f"- <!-- {meta} -->"


def entry_line(memory: Memory) -> str:
    """``- <text> [(N sessions)] <!-- id:<id> kind:<kind> status:<status> -->``."""
    meta = f"id:{memory.id} kind:{memory.kind} status:{memory.status}"
    if memory.untrusted:
        meta += " trust:untrusted"
    return _bullet(memory.text or "", session_count(memory), meta)


def parse_entries(content: str) -> list[Entry]:
    """Entries of a file written by this module, in file order.

    Lines without an id comment are ignored; bullets may use ``-``, ``*`` or ``+`` and any
    indentation; kind and status are optional.
    """
    entries: list[Entry] = []
    for line in content.splitlines():
        m = _ENTRY_RE.match(line)
        if not m:
            continue
        meta = {k.lower(): v for k, v in _META_RE.findall(m.group("meta"))}
        memory_id = meta.get("id")
        if not memory_id:
            continue
        body = _SESSIONS_RE.sub("", m.group("body"), count=1).strip()
        entries.append(Entry(memory_id, unescape_text(body), meta.get("kind"), meta.get("status")))
    return entries


# --- ranking --------------------------------------------------------------------------


def _ts(value: datetime | None) -> float:
    if value is None:
        return 0.0
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH).total_seconds()


def rank_key(memory: Memory) -> tuple:
    """Verified first, then more evidence sessions, importance, recency; id breaks ties."""
    recency = max(_ts(memory.last_seen), _ts(memory.updated_at))
    return (
        0 if memory.status == "verified" else 1,
        -session_count(memory),
        -float(memory.importance or 0.0),
        -recency,
        memory.id,
    )


def ranked(memories: Iterable[Memory]) -> list[Memory]:
    return sorted(memories, key=rank_key)


# --- rendering ------------------------------------------------------------------------


def _heading_text(s: str) -> str:
    return escape_text(s) or "(unnamed)"


def _document(title: str, sections: list[tuple[str | None, list[Memory]]]) -> str:
    """A file: title, note, then each section (optional ``##`` heading and bullets)."""
    lines = [f"# {title}", "", NOTE, ""]
    sections = [(h, ms) for h, ms in sections if ms]
    if not sections:
        lines += [EMPTY, ""]
    for heading, memories in sections:
        if heading:
            lines += [f"## {heading}", ""]
        lines += [entry_line(m) for m in memories]
        lines.append("")
    return "\n".join(lines)


def _kind_order(kind: str) -> tuple[int, str]:
    return (KINDS.index(kind), kind) if kind in KINDS else (len(KINDS), kind)


def _by_kind(memories: Iterable[Memory]) -> list[tuple[str | None, list[Memory]]]:
    groups: dict[str, list[Memory]] = {}
    for m in memories:
        groups.setdefault(m.kind, []).append(m)
    return [(KIND_TITLES.get(k, k), ranked(groups[k])) for k in sorted(groups, key=_kind_order)]


def _current(user_id: str, memories: Iterable[Memory]) -> list[Memory]:
    out = []
    for m in memories:
        if m.user_id != user_id:
            log.warning("memory %s belongs to another user; not rendered", m.id)
            continue
        if m.status in CURRENT_STATUSES:
            out.append(m)
    return out


def _coding_files(base: Path, current: list[Memory]) -> list[RenderedFile]:
    projects: dict[str | None, list[Memory]] = {}
    for m in current:
        if m.kind in CODE_KINDS:
            projects.setdefault(m.project or None, []).append(m)
    files: dict[Path, RenderedFile] = {}
    for project, memories in projects.items():
        if project is None:
            path, title = base / CODING_DIR / UNSCOPED_PROJECT_FILE, "Coding: (no project)"
        else:
            path, title = base / CODING_DIR / f"{safe_name(project)}.md", f"Coding: {_heading_text(project)}"
        files[path] = RenderedFile(path, _document(title, _by_kind(memories)))
    files.update(_stale_coding_files(base, files))
    return [files[p] for p in sorted(files)]


def _stale_coding_files(base: Path, fresh: dict[Path, RenderedFile]) -> dict[Path, RenderedFile]:
    """Project files on disk with no current memories left: rewritten empty, never left stale."""
    folder = base / CODING_DIR
    if not folder.is_dir():
        return {}
    out: dict[Path, RenderedFile] = {}
    for path in folder.glob("*.md"):
        if path in fresh or not path.is_file():
            continue
        title = "Coding"
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                first = fh.readline().rstrip("\n")
            if first.startswith("# Coding"):
                title = first[2:]
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
        out[path] = RenderedFile(path, _document(title, []))
    return out


def render_user(workspace: Path, user_id: str, memories: list[Memory], *, dreams_cap: int = 50) -> list[RenderedFile]:
    """Every file of one user's view, from that user's memories (only current ones are shown)."""
    base = user_dir(workspace, user_id)
    current = _current(user_id, memories)

    verified = [m for m in current if m.status == "verified" and m.kind != "daily_note"]
    profile = [m for m in current if m.kind == "profile" and not m.untrusted]  # USER.md may be injected
    prefs = [m for m in current if m.kind == "preference" and m.status == "verified"]
    agent = ranked(m for m in current if m.kind in AGENT_KINDS)
    cap = max(0, dreams_cap)
    dreams, archive = agent[:cap], agent[cap:]

    user_sections = [(KIND_TITLES["profile"], ranked(profile)), (KIND_TITLES["preference"], ranked(prefs))]
    files = [
        RenderedFile(base / MEMORY_FILE, _document("Memory", _by_kind(verified))),
        RenderedFile(base / USER_FILE, _document("User", user_sections)),
        RenderedFile(base / DREAMS_FILE, _document("Dreams", [(None, dreams)])),
    ]
    archive_path = base / DREAMS_ARCHIVE_FILE
    if archive or archive_path.exists():
        files.append(RenderedFile(archive_path, _document("Dreams archive", [(None, archive)])))
    files += _coding_files(base, current)
    log.debug("rendered %d files for %s (%d current memories)", len(files), base.name, len(current))
    return files


# --- writing --------------------------------------------------------------------------


RENDER_LOCK = ".render.lock"


@contextmanager
def render_lock(folder: Path) -> Iterator[None]:
    """Hold the render lock of a user's folder: one renderer at a time, across processes."""
    folder.mkdir(parents=True, exist_ok=True)
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
    path.parent.mkdir(parents=True, exist_ok=True)
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
        if m is None or m.group("host") != _HOST or _alive(int(m.group("pid"))):
            continue
        try:
            tmp.unlink()
            removed += 1
        except FileNotFoundError:
            continue
    if removed:
        log.info("removed %d orphaned temp files in %s", removed, folder)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    return _bullet(text, 0, f"id:{memory_id} kind:daily_note")


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
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    log.debug("appended %d daily notes to %s", len(lines), path.name)
    return path
