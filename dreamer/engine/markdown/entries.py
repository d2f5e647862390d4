"""One entry of the Markdown view: the bullet line a memory is written as, ending in
``<!-- id:<id> kind:<kind> status:<status> -->``, and the entries read back from a file a
person may have edited (`parse_entries`), matched to their memories by that comment."""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from dreamer.core.secrets.redact import redact


class ViewedMemory(Protocol):
    """What the view reads of a memory: a `Memory`, or a row of its columns."""

    @property
    def id(self) -> str: ...
    @property
    def user_id(self) -> str: ...
    @property
    def project(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def evidence(self) -> Sequence[object] | None: ...
    @property
    def importance(self) -> float: ...
    @property
    def untrusted(self) -> bool: ...
    @property
    def updated_at(self) -> datetime | None: ...
    @property
    def last_seen(self) -> datetime | None: ...


@dataclass(frozen=True)
class Entry:
    """One bullet read back from a file."""

    memory_id: str
    text: str
    kind: str | None = None
    status: str | None = None


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


def session_count(memory: ViewedMemory) -> int:
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


def bullet(text: str, sessions: int, meta: str) -> str:
    """``- <text> [(N sessions)] <!-- <meta> -->``; the count shows from two sessions up.

    It also shows when the text itself ends like a count, so `parse_entries` always strips
    exactly the one that was added.
    """
    body = _shown(text)
    if sessions >= 2 or _SESSIONS_RE.search(body):
        body = f"{body} ({sessions} session{'' if sessions == 1 else 's'})".lstrip()
    return f"- {body} <!-- {meta} -->" if body else f"- <!-- {meta} -->"


def entry_line(memory: ViewedMemory) -> str:
    """``- <text> [(N sessions)] <!-- id:<id> kind:<kind> status:<status> -->``."""
    meta = f"id:{memory.id} kind:{memory.kind} status:{memory.status}"
    if memory.untrusted:
        meta += " trust:untrusted"
    return bullet(memory.text or "", session_count(memory), meta)


def parse_entries(content: str) -> list[Entry]:
    """Entries of a view file (as `entry_line` and `daily_note_line` write them), in file order.

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
