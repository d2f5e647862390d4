"""What a person changed in a user's Markdown view: each file on disk read against what was last
rendered into it (`ViewState`), as edits (`edit`, `forget`, `add`, `confirm`) and problems (a
line that cannot be read, with its file and line number).

A file with a problem yields no edits at all and is not written again until the person fixes
it: the file stays as they wrote it. The record of what was rendered keeps, per file, its hash
and a hash of each entry's text, never the text itself.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from dreamer.engine.markdown.entries import _ENTRY_RE, _META_RE, _SESSIONS_RE, unescape_text
from dreamer.engine.markdown.render import EMPTY, KIND_TITLES, NOTE
from dreamer.engine.markdown.views import DREAMS_ARCHIVE_FILE, DREAMS_FILE, MEMORY_FILE, USER_FILE

_BULLET_RE = re.compile(r"^\s*[-*+][ \t]+(?P<body>.*?)\s*$")
_KIND_OF_TITLE = {title: kind for kind, title in KIND_TITLES.items()}
_FILE_KIND = {MEMORY_FILE: "profile", USER_FILE: "profile", DREAMS_FILE: "focus", DREAMS_ARCHIVE_FILE: "focus"}
_CODING_KIND = "design_decision"


def digest(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class RenderedState:
    """What the last render wrote into one file: its hash, each entry's text hash, its project."""

    sha: str
    entries: Mapping[str, str]  # memory id -> digest of the entry's text as shown
    project: str | None = None


@dataclass(frozen=True)
class Edit:
    """One change a person made: `event` is edit, forget, add, confirm, or conflict (one entry
    edited two ways in one save: `others` holds each other version as (file, line, text))."""

    event: str
    file: str
    line: int
    memory_id: str | None = None
    text: str | None = None
    kind: str | None = None
    project: str | None = None
    others: tuple[tuple[str, int, str], ...] = ()


@dataclass(frozen=True)
class Problem:
    """A line that could not be read back, by file (relative to the user's folder) and line."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class ReadBack:
    """The edits of a view, the problems, and which files differ from their last render."""

    edits: list[Edit] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # files a person changed since the last render
    held: list[str] = field(default_factory=list)  # changed files with a problem: left as they are


@dataclass(frozen=True)
class _Line:
    no: int
    memory_id: str | None
    text: str
    kind: str


def _default_kind(rel: str) -> str:
    return _FILE_KIND.get(rel, _CODING_KIND)


def _parse(rel: str, content: str, known: set[str]) -> tuple[list[_Line], list[Problem]]:
    """The entry lines (by id, or new without one) of a file and the lines that are no entry."""
    lines: list[_Line] = []
    problems: list[Problem] = []
    kind = _default_kind(rel)
    for no, raw in enumerate(content.splitlines(), start=1):
        text = raw.strip()
        if not text or text in (NOTE, EMPTY):
            continue
        if text.startswith("#"):
            kind = _KIND_OF_TITLE.get(text.lstrip("#").strip(), kind)
            continue
        entry = _ENTRY_RE.match(raw)
        if entry is not None:
            meta = {k.lower(): v for k, v in _META_RE.findall(entry.group("meta"))}
            memory_id = meta.get("id")
            if not memory_id or memory_id not in known:
                problems.append(Problem(rel, no, f"unknown memory id {memory_id!r}" if memory_id else "no memory id"))
                continue
            body = unescape_text(_SESSIONS_RE.sub("", entry.group("body"), count=1).strip())
            lines.append(_Line(no, memory_id, body, meta.get("kind", kind)))
            continue
        bullet = _BULLET_RE.match(raw)
        if bullet is not None and "<!--" not in raw and "-->" not in raw and bullet.group("body"):
            lines.append(_Line(no, None, unescape_text(bullet.group("body")), kind))
            continue
        problems.append(Problem(rel, no, "broken id comment" if "<!--" in raw or "-->" in raw else "not an entry"))
    return lines, problems


def read_back(disk: Mapping[str, str | None], state: Mapping[str, RenderedState], known: set[str]) -> ReadBack:
    """The edits of the files in `disk` (relative name -> content, None: gone) against `state`.

    `known`: the ids of the user's current memories. A file gone from disk, or never rendered,
    is no edit (the next render writes it again)."""
    out = ReadBack()
    present: dict[str, list[tuple[str, _Line]]] = {}
    readable: set[str] = set()
    for rel, content in sorted(disk.items()):
        was = state.get(rel)
        if was is None or content is None or digest(content) == was.sha:
            continue
        out.changed.append(rel)
        lines, problems = _parse(rel, content, known)
        if problems:
            out.problems += problems
            out.held.append(rel)
            continue
        readable.add(rel)
        for ln in lines:
            if ln.memory_id is None:
                out.edits.append(Edit("add", rel, ln.no, text=ln.text, kind=ln.kind, project=was.project))
            else:
                present.setdefault(ln.memory_id, []).append((rel, ln))
    out.edits += _entry_edits(state, readable, present)
    return out


def _entry_edits(
    state: Mapping[str, RenderedState], readable: set[str], present: dict[str, list[tuple[str, _Line]]]
) -> list[Edit]:
    """Changed text, removed entries and moves, from the readable changed files."""
    before: dict[str, dict[str, str]] = {}  # id -> {file: text digest} as last rendered
    for rel, st in state.items():
        for memory_id, text_sha in st.entries.items():
            before.setdefault(memory_id, {})[rel] = text_sha
    edits: list[Edit] = []
    for memory_id in sorted(set(before) | set(present)):
        was = before.get(memory_id, {})
        now = present.get(memory_id, [])
        shas = set(was.values())
        variants = [(rel, ln) for rel, ln in now if digest(ln.text) not in shas]
        changed = variants[0] if variants else None
        if changed is not None:
            rel, ln = changed
            others = tuple(dict.fromkeys((r, o.no, o.text) for r, o in variants[1:] if o.text != ln.text))
            event = "conflict" if others else "edit"
            edits.append(Edit(event, rel, ln.no, memory_id=memory_id, text=ln.text, kind=ln.kind, others=others))
        moved_in = [(rel, ln) for rel, ln in now if rel not in was]
        gone = [rel for rel in was if rel in readable and all(r != rel for r, _ in now)]
        confirm = next(((rel, ln) for rel, ln in moved_in if rel == MEMORY_FILE), None)
        if confirm is not None:
            edits.append(Edit("confirm", confirm[0], confirm[1].no, memory_id=memory_id))
        elif gone and not moved_in and changed is None:
            edits.append(Edit("forget", gone[0], 0, memory_id=memory_id))
    return edits
