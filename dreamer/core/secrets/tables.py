"""Secrets laid out rather than said: in a table whose header names the secret, and as named
values after a label ("Wi-Fi passwords: home = X, office = Y"). Read by `redact` beside the
rules of `secret_meaning`."""

from __future__ import annotations

import re

from dreamer.core.secrets.meaning import FORWARD_RULE, LABEL, label_kind
from dreamer.core.secrets.shapes import KIND_SHAPES, SHAPES, Span
from dreamer.core.secrets.words import ARTICLES

# --- tables ---------------------------------------------------------------------------------

_LABEL_CELL = re.compile(rf"(?i)(?:(?:{ARTICLES})[ \t]+)?{LABEL}")
_RULE_ROW = re.compile(r"[\s|:+\-]*")


def _cells(line: str, offset: int) -> list[tuple[int, int]]:
    """The spans of a table row's cells (``| a | b |`` or tab-separated), or [] for no row."""
    sep = "|" if line.count("|") >= 2 or (line.count("|") == 1 and not line.strip().startswith("|")) else "\t"
    if sep not in line:
        return []
    spans, pos = [], 0
    for part in line.split(sep):
        lead = len(part) - len(part.lstrip())
        spans.append((offset + pos + lead, offset + pos + len(part.rstrip())))
        pos += len(part) + 1
    if line.lstrip().startswith("|"):
        spans = spans[1:]
    if line.rstrip().endswith("|"):
        spans = spans[:-1]
    return spans


def _column_kinds(text: str, cells: list[tuple[int, int]]) -> dict[int, tuple[str, str]]:
    """Which columns a header row names as secrets: {column: (family, kind)}."""
    named: dict[int, tuple[str, str]] = {}
    for col, (start, end) in enumerate(cells):
        m = _LABEL_CELL.fullmatch(text, start, end)
        if m is not None and (found := label_kind(m)) is not None:
            named[col] = found
    return named


def find_in_tables(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each value in a table column whose header names a secret."""
    if "|" not in text and "\t" not in text:
        return []
    found: list[tuple[int, int, str]] = []
    named: dict[int, tuple[str, str]] = {}
    offset = 0
    for line in text.splitlines(keepends=True):
        cells = _cells(line.rstrip("\r\n"), offset)
        offset += len(line)
        if not cells:
            named = {}
        elif named and not _RULE_ROW.fullmatch(line.strip()):
            for col, (family, kind) in named.items():
                if col < len(cells) and (span := _cell_value(text, cells[col], family, kind)):
                    found.append((*span, kind))
        elif not named:
            named = _column_kinds(text, cells)
    return found


def _cell_value(text: str, cell: tuple[int, int], family: str, kind: str) -> Span | None:
    value = text[cell[0] : cell[1]]
    span = KIND_SHAPES.get(kind, SHAPES[family])(value, "verb") if value else None
    return (cell[0] + span[0], cell[0] + span[1]) if span else None


# --- named values after a label ------------------------------------------------------------------

_NAMED = re.compile(r"[ \t]*(?P<name>[^\W\d_][\w'’ \-]{0,24}?)[ \t]*(?:=|:|->|→)[ \t]*")
_NAMED_HINT = re.compile(r"[:：][ \t]*[^\W\d_][\w'’ \-]{0,24}?[ \t]*(?:=|:|->|→)")
_NEXT = re.compile(r"[ \t]*[,;][ \t]*")


def find_named_values(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each value named after a label and a colon: "PINs: bank = 1234,
    phone = 5678"."""
    if not _NAMED_HINT.search(text):
        return []
    found: list[tuple[int, int, str]] = []
    for m in FORWARD_RULE.matches(text, text.lower()):
        if ":" not in m.group("sep") or (named := label_kind(m)) is None:
            continue
        family, kind = named
        tail, base, pos = m.group("tail"), m.start("tail"), 0
        while (pair := _NAMED.match(tail, pos)) is not None:
            span = KIND_SHAPES.get(kind, SHAPES[family])(tail[pair.end() :], "verb")
            if span is None:
                break
            found.append((base + pair.end() + span[0], base + pair.end() + span[1], kind))
            if (nxt := _NEXT.match(tail, pair.end() + span[1])) is None:
                break
            pos = nxt.end()
    return found


def find_laid_out(text: str) -> list[tuple[int, int, str]]:
    """Every secret of a table column or named after a label."""
    return find_in_tables(text) + find_named_values(text)
