"""Secrets never leave for the model, never get stored in a memory, never reach a file.

`redact` replaces each secret found in a text with ``[REDACTED:<kind>]``; `strip_injected`
removes the memory blocks the online side put into prompts, so the dreamer never learns
from its own output; `clean_for_model` does both, in that order.

A context block's markers carry an id drawn for each render (`context_markers`): the block is
stripped up to the closing marker of its own id, which no stored text can know, so a closing
tag inside the block cannot end it early. Blocks without an id (rendered before ids existed)
are stripped as they always were.
"""

from __future__ import annotations

import logging
import re
import secrets

from dreamer.core.secrets.meaning import MEANING_RULES
from dreamer.core.secrets.prose import PROSE_RULES
from dreamer.core.secrets.rules import MARKER_RE, RULES, Rule
from dreamer.core.secrets.structure import find_by_structure, secrets_in_answer
from dreamer.core.secrets.tokens import UNNAMED, find_tokens
from dreamer.core.secrets.values import encoded
from dreamer.core.secrets.vendors import find_vendor_tokens

log = logging.getLogger(__name__)


# --- finding and replacing ------------------------------------------------------------


def _generic(rule: Rule) -> bool:
    """A rule that knows only that something is a password or a secret (an assignment, a flag)."""
    return callable(rule.kind) or rule.kind in ("password", "high_entropy")


ALL_RULES: tuple[Rule, ...] = (
    tuple(r for r in RULES if not _generic(r))  # the formats first: they name the kind
    + MEANING_RULES  # then what the words say it is: a Wi-Fi password, a door code, ...
    + tuple(r for r in RULES if _generic(r))
    + PROSE_RULES
)
"""Every rule, in the order that names an overlap: the most specific first."""


def _span(rule: Rule, m: re.Match[str]) -> tuple[int, int]:
    if rule.span is not None:
        return rule.span(m)
    if rule.group != "value":
        return m.span(rule.group)
    for name in ("edq", "dq", "sq", "bare"):
        if m.group(name) is not None:
            return m.span(name)
    return m.span()


def _candidates(text: str, decode: bool = True) -> list[tuple[int, int, int, str]]:
    """Every rule match, every secret in a table column, every secret a label names by
    structure, and every encoded run hiding one (`decode`), as (start, end, priority, kind)."""
    markers = [mm.span() for mm in MARKER_RE.finditer(text)]
    lowered = text.lower()
    found: list[tuple[int, int, int, str]] = []
    for priority, rule in enumerate(ALL_RULES):
        if not rule.may_match(text):
            continue
        for m in rule.matches(text, lowered):
            if rule.check is None or rule.check(m):
                found.append((*_span(rule, m), priority, rule.kind_of(m)))
    found += [(start, end, -1, kind) for start, end, kind in find_vendor_tokens(text)]  # formats name the kind
    found += [(start, end, -1 if kind != UNNAMED else len(ALL_RULES), kind) for start, end, kind in find_tokens(text)]
    found += [(start, end, len(ALL_RULES), kind) for start, end, kind in find_by_structure(text)]
    if decode:
        found += [
            (s, e, len(ALL_RULES), kinds[0][3]) for s, e, out in encoded(text) if (kinds := _candidates(out, False))
        ]
    return [c for c in found if c[0] < c[1] and not any(a <= c[0] and c[1] <= b for a, b in markers)]


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """(kind, start, end) of each secret, sorted and non-overlapping.

    Overlapping matches merge into one span, named after the most specific rule.
    """
    return _merged(_candidates(text))


def _merged(candidates: list[tuple[int, int, int, str]]) -> list[tuple[str, int, int]]:
    merged: list[tuple[int, int, int, str]] = []  # (start, end, priority, kind)
    for start, end, priority, kind in sorted(candidates):
        if merged and start < merged[-1][1]:
            first, last_end, best, best_kind = merged[-1]
            if priority < best:
                best, best_kind = priority, kind
            merged[-1] = (first, max(last_end, end), best, best_kind)
        else:
            merged.append((start, end, priority, kind))
    return [(kind, start, end) for start, end, _, kind in merged]


def redact(text: str, asked: str | None = None) -> str:
    """The text with each secret replaced by ``[REDACTED:<kind>]``; with `asked`, the message
    it answers, also the secret that message asked for ("What's the PIN?" then "4417")."""
    if not text:
        return text
    spans = find_secrets(text)
    if asked:
        spans = _merged(
            [(s, e, 0, k) for k, s, e in spans] + [(s, e, 1, k) for s, e, k in secrets_in_answer(asked, text)]
        )
    if not spans:
        return text
    parts: list[str] = []
    pos = 0
    for kind, start, end in spans:
        parts.append(text[pos:start])
        parts.append(f"[REDACTED:{kind}]")
        pos = end
    parts.append(text[pos:])
    log.debug("redacted %d secrets: %s", len(spans), sorted({k for k, _, _ in spans}))
    return "".join(parts)


# --- blocks the online side injected ---------------------------------------------------

_INJECTED_TAGS = ("memory-context", "recalled-memories")
_TAGS = "|".join(re.escape(t) for t in _INJECTED_TAGS)

MEMORY_BLOCK_RE = re.compile(
    rf"<(?P<tag>{_TAGS})(?=[\s>/]|\Z)[^>]*(?:>[\s\S]*?(?:</(?P=tag)\s*>|\Z)|\Z)",
    re.IGNORECASE,
)
"""One injected block (not nesting-aware; `strip_injected` handles nesting)."""

_TAG_RE = re.compile(rf"<(?P<close>/)?(?P<tag>{_TAGS})(?=[\s>/]|\Z)[^>]*(?:>|\Z)", re.IGNORECASE)
CONTEXT_TAG = "memory-context"
_ID_OPEN_RE = re.compile(rf'<(?P<tag>{_TAGS})\s+id="(?P<id>[0-9a-f]{{8,64}})"\s*>', re.IGNORECASE)
_PAIR_RE = re.compile(rf"<(?P<tag>{_TAGS})(?:\s[^<>]*)?>[^<>]*?</(?P=tag)\s*>", re.IGNORECASE)


def new_block_id() -> str:
    """A fresh id for one rendered block: 16 hex digits, never guessed by a stored text."""
    return secrets.token_hex(8)


def context_markers(block_id: str) -> tuple[str, str]:
    """The opening and closing markers of a context block with this id."""
    return f'<{CONTEXT_TAG} id="{block_id}">', f'</{CONTEXT_TAG} id="{block_id}">'


def _strip_by_id(text: str, *, unclosed_to_end: bool = True) -> str:
    """Remove every block opened with an id up to the closing marker of the same id; an opening
    never closed removes everything after it (or, with `unclosed_to_end` False, stays)."""
    out: list[str] = []
    pos = 0
    lowered = text.lower()
    while m := _ID_OPEN_RE.search(text, pos):
        close = f'</{m.group("tag")} id="{m.group("id")}"'.lower()
        end = lowered.find(close, m.end())
        close_end = lowered.find(">", end + len(close)) if end >= 0 else -1
        if close_end < 0 and not unclosed_to_end:
            out.append(text[pos : m.end()])
            pos = m.end()
            continue
        out.append(text[pos : m.start()])
        pos = len(text) if close_end < 0 else close_end + 1
    out.append(text[pos:])
    return "".join(out)


def without_injected_blocks(text: str) -> str:
    """`text` without the complete blocks the online side injected (an id's opening marker and
    its own closing one; an opening and closing tag without id, nothing markup-like between),
    while a stray, unmatched or look-alike tag stays, as the evidence the untrusted rule needs."""
    if not text or "<" not in text:
        return text
    return _PAIR_RE.sub("", _strip_by_id(text, unclosed_to_end=False))


def _strip_tag(text: str, tag: str) -> str:
    """Remove every outermost ``<tag>...</tag>`` block, counting nesting depth."""
    out: list[str] = []
    pos = 0
    depth = 0
    for m in _TAG_RE.finditer(text):
        if m.group("tag").lower() != tag:
            continue
        closing = m.group("close") is not None
        if depth == 0:
            out.append(text[pos : m.start()])
            pos = m.end()  # a stray closing tag is dropped by itself
            if not closing and not m.group(0).endswith("/>"):
                depth = 1
            continue
        if closing:
            depth -= 1
            if depth == 0:
                pos = m.end()
        elif not m.group(0).endswith("/>"):
            depth += 1
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def strip_injected(text: str) -> str:
    """Remove ``<memory-context ...>...</memory-context>`` and ``<recalled-memories>`` blocks.

    A block opened with an id ends only at the closing marker of that id; then, for blocks
    without one, tags are case-insensitive and may carry attributes, nested blocks go with their
    outer block, and a stray closing tag is dropped by itself. An opening tag that is never
    closed removes everything after it.
    """
    if not text or "<" not in text:
        return text
    text = _strip_by_id(text)
    for tag in _INJECTED_TAGS:
        text = _strip_tag(text, tag)
    return text


def clean_for_model(text: str) -> str:
    """What may be sent to a model or stored: injected blocks removed, secrets redacted."""
    return redact(strip_injected(text))


PREFIX_MARGIN = 1024
"""How far past a cut `clean_prefix` and `safe_cut` look, so a secret across it is seen whole."""


def safe_cut(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, or fewer: a secret across the cut is left out
    whole, never split into a head too short to be recognised later."""
    if len(text) <= limit:
        return text
    for _, start, end in find_secrets(text[: limit + PREFIX_MARGIN]):
        if start < limit < end:
            return text[:start]
    return text[:limit]


def clean_prefix(text: str, limit: int) -> str:
    """`clean_for_model` of about the first `limit` characters, cut so no secret is split.

    Cutting first and redacting after would leave the head of a secret that crosses the cut
    (too short for its pattern to match); here every secret that starts before the cut is
    replaced whole, and only `limit + PREFIX_MARGIN` characters are ever scanned."""
    if len(text) <= limit:
        return clean_for_model(text)
    window = strip_injected(text[: limit + PREFIX_MARGIN])
    parts: list[str] = []
    pos = 0
    for kind, start, end in find_secrets(window):
        if start >= limit:
            break
        parts += [window[pos:start], f"[REDACTED:{kind}]"]
        pos = end
    if pos < limit:
        parts.append(window[pos:limit])
    return "".join(parts)
