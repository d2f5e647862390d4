"""A memory's text on its way in and out: normalised before any check, stored redacted, and
shown as data.

`normalise` folds the compatibility forms a reader could act on (full-width brackets, bold
letters, no-break spaces, ligatures), keeps letters of every script as written, and removes the invisible format characters (zero-width spaces and joiners, bidirectional
controls, tag characters), so a look-alike of a tag or a keyword is seen as what it looks
like. Every memory is stored as `stored_text` gives it, whoever wrote it (a dream pass, an
agent, a flush), and every memory a context block injects is rendered by `as_data`: on one
line, markup defused, so no stored text can open, close or forge anything around it.
"""

from __future__ import annotations

import re
import unicodedata

from dreamer.core.secrets.redact import redact

# Unicode's format characters (category Cf): invisible, yet able to split a word or a tag
# ("<\u200b/memory-context>") or reorder what a reader sees (bidirectional controls).
FORMAT_CHARS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e"
    "\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]"
)
_ENTITY = re.compile(r"&(?=#?[0-9A-Za-z]+;)")  # the start of &lt; &#60; &#x3c;
_COMMENT = re.compile(r"<!--.*?(?:-->|$)", re.S)  # an HTML comment, closed or not
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")  # ![alt](url): shown as its alt text
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)|\[([^\]]*)\]\[[^\]]*\]")  # [text](url), [text][ref]
_REFERENCE = re.compile(r"^\s*\[[^\]]+\]:\s*\S+.*$", re.M)  # [ref]: url
_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9:-]*(?:\s[^<>]*)?/?>")  # markup: dropped, its text kept
DEFUSED = {"<": "\u2039", ">": "\u203a", "&": "& "}  # ‹ ›, and "& lt;": no reader decodes it back


# Sentence punctuation Chinese and Japanese write full-width ("，", "：", "（"): kept as written,
# it can open or close nothing.
_PROSE_MARKS = frozenset(",.!?;:()")


def _folded(ch: str) -> str:
    """`ch` as NFKC folds it, when the folded form is ASCII a reader could act on (a full-width
    ``<``, a bold letter, a ligature, a no-break space); otherwise `ch` as written (a Thai vowel
    or a Korean letter NFKC would split, a full-width comma)."""
    folded = unicodedata.normalize("NFKC", ch)
    return folded if folded.isascii() and folded not in _PROSE_MARKS else ch


def normalise(text: str) -> str:
    """`text` with format characters removed and the compatibility forms a reader could act on
    folded (`_folded`); letters of every script kept as they are written."""
    text = unicodedata.normalize("NFC", FORMAT_CHARS.sub("", text))
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return text
    return "".join(_folded(ch) if not ch.isascii() else ch for ch in text)


def eager(text: str) -> str:
    """`text` as the most eager reader sees it: format characters removed, every compatibility
    form folded (NFKC). What the checks read; never what is stored."""
    return unicodedata.normalize("NFKC", FORMAT_CHARS.sub("", text))


def stored_text(text: str) -> str:
    """What any memory keeps of `text`: normalised, then its secrets redacted."""
    return redact(normalise(text))


def one_line(text: str) -> str:
    """`text` on one line: every line or paragraph break (``\\r``, ``\\n``, U+0085, U+2028,
    U+2029, vertical tab, form feed), every other control or format character and every run of
    spaces becomes one space. Letters of any script are kept as they are."""
    spaced = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in text)
    return " ".join(spaced.split())


def without_markup(text: str) -> str:
    """`text` with nothing a renderer would act on: HTML comments and tags dropped (their words
    kept), a Markdown image shown as its alt text and a link as its text, so no URL is emitted live."""
    text = _COMMENT.sub(" ", text)
    text = _REFERENCE.sub(" ", text)
    text = _IMAGE.sub(lambda m: f"(image: {m.group(1)})" if m.group(1).strip() else "(image)", text)
    text = _LINK.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    return _TAG.sub(" ", text)


def as_data(text: str) -> str:
    """A memory's text as a context block shows it: normalised and redacted again (a row kept
    before either existed is shown safely too; the invisible format characters go first, so a
    secret split by one is still found), without markup or live links (`without_markup`), on
    one line (`one_line`), with ``<`` and ``>`` shown as
    ‹ › and an entity's ``&`` followed by a space (``& lt;``), so it reads as text and can never
    be taken for markup, even by a reader that normalises or decodes entities."""
    flat = one_line(without_markup(stored_text(text)))
    return _ENTITY.sub(DEFUSED["&"], flat).replace("<", DEFUSED["<"]).replace(">", DEFUSED[">"])
