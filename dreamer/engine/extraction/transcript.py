"""The transcript a model reads: redacted message lines, how they are rendered (numbered,
under day headings, unable to forge structure), and how they are packed into chunks."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime
from functools import lru_cache

from dreamer.core.days import day_words
from dreamer.core.tokens import count_tokens


@dataclass(frozen=True)
class Line:
    """One transcript message, already stripped of injected blocks and redacted."""

    seq: int
    role: str
    name: str | None
    text: str
    context_only: bool = False  # overlap from before the cursor: shown, not learned from
    day: date | None = None  # the user's day it was said on (`days.local_day`), heading the first line of each day
    steering: tuple[str, ...] = ()  # steering patterns in the message as said, before stripping (`untrusted`)
    at: datetime | None = None  # when it was said (the message's own time)


@dataclass(frozen=True)
class Lesson:
    """A known experience entry shown beside a code chunk: the model names it by its label
    (`lesson_label`), never by its id."""

    entry_id: str
    text: str


@dataclass
class Chunk:
    lines: list[Line]
    tokens: int = 0
    sessions: int = 1  # how many sessions' lines it holds: the per-session limit counts once for each
    lessons: tuple[Lesson, ...] = ()  # known lessons of its project shown before it (code mode)

    @property
    def seqs(self) -> list[int]:
        return [ln.seq for ln in self.lines if not ln.context_only]


_TRANSCRIPT_TAG = re.compile(r"<(/?\s*transcript)", re.I)
_TAG = re.compile(r"<(/?\s*(?:transcript|lessons))", re.I)  # defused in a lesson
CUT = " [...cut]"  # ends a text cut to fit a chunk
_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")  # what str.splitlines() breaks on


def render_line(line: Line) -> str:
    """``[seq] speaker: text``, the speaker being the message's name (a person's, a tool's), else
    its role; the user's names are given once, in the transcript tag. The text cannot forge
    structure: its continuation lines are indented (no line of it starts like ``[n] role:`` or
    like a day heading, whatever line break it uses), its speaker is one line, and transcript
    tags in it are defused."""
    who = _BREAK.sub(" ", _TRANSCRIPT_TAG.sub(r"‹\1", line.name or line.role))
    mark = " (context)" if line.context_only else ""
    text = _BREAK.sub("\n    ", _TRANSCRIPT_TAG.sub(r"‹\1", line.text))
    return f"[{line.seq}] {who}{mark}: {text}"


def render_transcript(lines: list[Line]) -> str:
    """The lines between transcript tags; the tag names who speaks as the user when names are shown."""
    users = dict.fromkeys(_tag_safe(ln.name) for ln in lines if ln.role == "user" and ln.name)
    tag = f'<transcript user="{", ".join(users)}">' if users else "<transcript>"
    return f"{tag}\n{render_body(lines)}\n</transcript>"


def lesson_label(k: int) -> str:
    """The label of the `k`-th lesson shown (0-based): L1, L2, ..."""
    return f"L{k + 1}"


def render_lessons(lessons: tuple[Lesson, ...] | list[Lesson]) -> str:
    """The known lessons block shown before a transcript (empty without lessons): one line
    each, ``L1: text``; a lesson cannot forge a line or a tag."""
    if not lessons:
        return ""
    rows = [f"{lesson_label(k)}: {_defused(ls.text)}" for k, ls in enumerate(lessons)]
    return "<lessons>\n" + "\n".join(rows) + "\n</lessons>\n"


def _defused(text: str) -> str:
    return _BREAK.sub(" ", _TAG.sub(r"‹\1", text))


def render_body(lines: list[Line]) -> str:
    """The rendered lines, each day they were said on (`Line.day`) heading its first line
    ("# 8 May 2023"): the model reads "yesterday" against it. No message can forge a heading
    (`render_line`)."""
    out: list[str] = []
    shown: date | None = None
    for ln in lines:
        if ln.day is not None and ln.day != shown:
            out.append(day_heading(ln.day))
            shown = ln.day
        out.append(render_line(ln))
    return "\n".join(out)


def day_heading(day: date) -> str:
    return f"# {day_words(day)}"


def _tag_safe(name: str) -> str:
    return re.sub(r'[<>"]', "", _BREAK.sub(" ", name))


def chunk_lines(lines: list[Line], max_tokens: int) -> list[Chunk]:
    """Pack lines into chunks of at most `max_tokens`; one oversized line is cut, not dropped."""
    chunks: list[Chunk] = []
    current = Chunk(lines=[])
    shown: date | None = None  # the day the current chunk's last heading names
    for line in lines:
        line, tokens = _fit(line, max_tokens)
        if current.lines and current.tokens + tokens + _opening(line, shown) > max_tokens:
            chunks.append(current)
            current, shown = Chunk(lines=[]), None
        current.lines.append(line)
        current.tokens += tokens + _opening(line, shown)
        shown = line.day or shown
    if any(not ln.context_only for ln in current.lines):
        chunks.append(current)
    return [c for c in chunks if c.seqs]


def _rendered_tokens(line: Line) -> int:
    return count_tokens(render_line(line)) + 1


@lru_cache(maxsize=4096)
def _heading_tokens(day: date) -> int:
    return count_tokens(day_heading(day)) + 1


def _opening(line: Line, shown: date | None) -> int:
    """The tokens of the day heading a line brings when it opens a day the chunk has not shown."""
    return _heading_tokens(line.day) if line.day is not None and line.day != shown else 0


def _fit(line: Line, max_tokens: int) -> tuple[Line, int]:
    """The line and its rendered tokens; its text cut (never under 64 characters) when it would
    not fit a chunk of its own with its number, speaker and day heading."""
    tokens = _rendered_tokens(line)
    if tokens + _opening(line, None) <= max_tokens:
        return line, tokens
    room = max_tokens - _rendered_tokens(replace(line, text="")) - _opening(line, None) - 1
    keep = max(64, room * 3)
    while keep > 64 and count_tokens(line.text[:keep] + CUT) > room:
        keep = keep * 3 // 4
    cut = replace(line, text=line.text[:keep] + CUT)
    return cut, _rendered_tokens(cut)
