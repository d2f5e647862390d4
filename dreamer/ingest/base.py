"""Parsed transcript shapes shared by every importer, and the line-level helpers they use."""

from __future__ import annotations

import json
import logging
import os
import stat
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from dreamer.core.days import day_problem
from dreamer.core.errors import IngestError, json_reason, os_reason
from dreamer.core.models import ROLES
from dreamer.core.secrets.redact import redact
from dreamer.core.settings import Settings

log = logging.getLogger(__name__)

DEFAULT_MAX_MESSAGE_BYTES: int = Settings.model_fields["max_message_bytes"].default
MAX_FIELD_CHARS = 255  # name, tool_call_id and external ids fit a VARCHAR(255)
UNSTORABLE = "a NUL character or an unpaired surrogate"  # what `storable` refuses
CONTROL = "a control character or a line break"  # what an identifier may not hold besides (`identifier_problem`)
TOO_DEEP = "JSON nested too deeply"  # past the interpreter's recursion limit: refused like malformed JSON
_EPOCH_MS_THRESHOLD = 100_000_000_000  # numbers above this are epoch milliseconds
NOT_FILES = (  # what a path names instead of a regular file
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


@dataclass
class ParsedMessage:
    """One message of a transcript, normalised to the store's shape."""

    role: str
    content: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    created_at: datetime | None = None
    meta: dict[str, Any] | None = None
    line: int | None = None


@dataclass
class ParsedSession:
    """One conversation of a transcript file."""

    external_id: str
    messages: list[ParsedMessage]
    user_id: str | None = None
    project: str | None = None
    title: str | None = None
    created_at: datetime | None = None
    source: str = ""


@dataclass
class Rejection:
    """A part of a file that was not imported, and why."""

    path: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        if self.line is None:
            return f"{self.path}: {self.reason}"
        return f"{self.path}:{self.line}: {self.reason}"


@dataclass
class ParseResult:
    sessions: list[ParsedSession] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)


class LineRejected(Exception):
    """Raised inside an importer for one bad line or item; becomes a `Rejection`."""


# --- reading ------------------------------------------------------------------


def read_bytes(path: Path) -> bytes:
    """The whole file, or `IngestError` when it cannot be read."""
    path = Path(path)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise IngestError(_unreadable(path, exc)) from exc


def iter_raw_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw bytes) for every line; opening errors become `IngestError`."""
    path = Path(path)
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise IngestError(_unreadable(path, exc)) from exc
    with handle:
        try:
            yield from enumerate(handle, start=1)
        except OSError as exc:
            raise IngestError(_unreadable(path, exc)) from exc


def iter_json_lines(path: Path, rejections: list[Rejection]) -> Iterator[tuple[int, Any]]:
    """Decoded JSON values of the non-blank lines; bad UTF-8 or JSON lines are rejected."""
    where = str(path)
    for lineno, raw in iter_raw_lines(path):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            rejections.append(Rejection(where, lineno, f"not valid UTF-8 (byte offset {exc.start})"))
            continue
        if lineno == 1:
            text = text.lstrip("\ufeff")
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            rejections.append(Rejection(where, lineno, "invalid JSON: " + json_reason(exc, f"column {exc.colno}")))
            continue
        except RecursionError:
            rejections.append(Rejection(where, lineno, TOO_DEEP))
            continue
        yield lineno, value


def check_readable(path: Path) -> None:
    """Raise `IngestError` unless `path` is a regular file that can be opened for reading, under a
    UTF-8 name (importers make session ids of names); anything else (a directory, a FIFO, a device)
    is refused before it is opened."""
    path = Path(path)
    if not utf8_name(path):
        raise IngestError(f"cannot import {shown_path(path)}: its name is not valid UTF-8 (rename the file)")
    try:
        mode = path.stat().st_mode
        if stat.S_ISREG(mode):
            with open(path, "rb"):
                return
    except OSError as exc:
        raise IngestError(_unreadable(path, exc)) from exc
    raise IngestError(f"cannot read {path}: it is {not_a_file(mode)}")


def not_a_file(mode: int) -> str:
    """What a file mode names instead of a regular file ("a FIFO")."""
    return next((what for test, what in NOT_FILES if test(mode)), "not a regular file")


def utf8_name(path: Path) -> bool:
    """Whether the file's name is valid UTF-8 (undecodable bytes are lone surrogates in `str`)."""
    try:
        path.name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: Path) -> str:
    r"""`path` printable as it is: bytes that are not UTF-8 as escapes (``a\xffb.jsonl``)."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def _unreadable(path: Path, exc: OSError) -> str:
    if path.is_dir():
        return f"cannot read {path}: it is a directory"
    return f"cannot read {path}: {os_reason(exc)}"


# --- values -------------------------------------------------------------------


def identifier_problem(value: str) -> str | None:
    """Why `value` cannot be an identifier (of a user, agent, team, project, session or memory),
    or None: the store keeps an identifier as it is, and listings and logs show it on one line."""
    if not storable(value):
        return UNSTORABLE
    if any(unicodedata.category(ch) in ("Cc", "Zl", "Zp") for ch in value):
        return CONTROL
    return None


def storable(value: str) -> bool:
    """Whether the SQL stores keep `value` as it is (no NUL, no lone surrogate)."""
    return clean_text(value) == value


def clean_text(value: str) -> str:
    """Text the SQL stores accept: NUL characters and lone surrogates become U+FFFD."""
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return value


def optional_text(value: Any, what: str) -> str | None:
    """A short optional string field (name, ids); rejects non-strings and over-long values."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise LineRejected(f"{what} must be a string")
    text = clean_text(value)
    if len(text) > MAX_FIELD_CHARS:
        raise LineRejected(f"{what} longer than {MAX_FIELD_CHARS} characters")
    return text


def short_title(value: Any) -> str | None:
    """A title cut to the column width; None for non-strings and blanks."""
    if not isinstance(value, str) or not value.strip():
        return None
    return clean_text(value.strip())[:MAX_FIELD_CHARS]


def parse_timestamp(value: Any) -> datetime | None:
    """ISO 8601 text or epoch seconds/milliseconds as aware UTC; None when absent or unreadable."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return as_utc(value)
    if isinstance(value, (int, float)):
        seconds = value / 1000 if abs(value) > _EPOCH_MS_THRESHOLD else value
        try:
            return datetime.fromtimestamp(seconds, tz=UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not value.strip():
        return None
    text = value.strip()
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        try:
            return parse_timestamp(float(text))
        except ValueError:
            log.debug("unreadable timestamp %r", value)
            return None
    try:
        return as_utc(parsed)
    except OverflowError:  # at the edge of the calendar, the offset leaves it
        log.debug("timestamp out of range %r", value)
        return None


def as_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def to_json_text(value: Any) -> str:
    """Tool-call arguments as JSON text (strings are kept as they are)."""
    if isinstance(value, str):
        return clean_text(value)
    return clean_text(json_text(value))


def json_text(value: Any) -> str:
    """`value` as JSON text; `LineRejected` when it is nested too deeply to write."""
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except RecursionError:
        raise LineRejected(TOO_DEEP) from None


def message_size(message: ParsedMessage) -> int:
    """UTF-8 bytes of the content plus any tool-call arguments."""
    size = len(message.content.encode("utf-8"))
    for call in message.tool_calls or ():
        size += len(str(call.get("arguments") or "").encode("utf-8"))
    return size


def check_message(message: ParsedMessage, max_message_bytes: int) -> None:
    """Reject a message with an unknown role, over the size limit, or at a time whose day cannot
    be told in every time zone (`days.day_problem`)."""
    if message.role not in ROLES:
        raise LineRejected(f"unknown role {message.role!r}")
    if message.created_at is not None and (problem := day_problem(message.created_at)):
        raise LineRejected(f"its time {problem}")
    size = message_size(message)
    if size > max_message_bytes:
        raise LineRejected(f"message is {size} bytes, over the {max_message_bytes}-byte limit")


def redacted(m: ParsedMessage, asked: ParsedMessage | None = None) -> ParsedMessage:
    """The message as it is stored by default: each secret of its text and of its tool calls'
    arguments replaced by ``[REDACTED:<kind>]``, and (with `asked`, the message before it) the
    secret it gives when that message asked for one ("What's the PIN?" then "4417"). Its hash
    stays that of the message as said, so importing the same transcript again still finds it."""
    calls = m.tool_calls and [
        {**c, "arguments": redact(c["arguments"])} if isinstance(c.get("arguments"), str) else c for c in m.tool_calls
    ]
    content = redact(m.content, asked=asked.content if asked is not None else None)
    return replace(m, content=content, tool_calls=calls or m.tool_calls)


def session_start(messages: list[ParsedMessage]) -> datetime | None:
    """The earliest message time, if any message has one."""
    times = [m.created_at for m in messages if m.created_at is not None]
    return min(times) if times else None


def project_name(cwd: str | None) -> str | None:
    """Basename of a POSIX or Windows working directory."""
    if not cwd:
        return None
    pure = PureWindowsPath(cwd) if "\\" in cwd else PurePosixPath(cwd)
    return clean_text(pure.name)[:MAX_FIELD_CHARS] or None
