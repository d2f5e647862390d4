"""The shapes a secret's value takes once the words before it say a secret follows: read by
`secret_meaning`.

Each shape reads the text after a label (its `tail`) and gives the value's span in it, or None
when what follows describes the secret instead of giving it ("is wrong", "is on a card in my
desk", "is 16 characters long"). `how` says how the label met the value: ``"verb"`` ("is", ":",
"lautet", "は"), ``"line"`` (the value on the next line), ``"bare"`` (a space only: "PIN 7305")
or ``"to"`` ("changed my password to ...").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from dreamer.core.secrets.rules import is_code, is_placeholder
from dreamer.core.secrets.words import DESCRIBING, FUNCTION_WORDS, NOT_A_VALUE, UNITS

Span = tuple[int, int]

_CJK = "\u3000-\u30ff\u3400-\u9fff\uff00-\uffef"
_QUOTED = re.compile(r"[\"“«「『'`‘](?P<q>[^\"“”«»「」『』'`‘’\n]{1,200})[\"”»」』'`’]")
_TOKEN = re.compile(r"[^\s\"“”«»「」『』`、。，,;\u3000-\u30ff\u3400-\u9fff（）：；！？]+")  # full-width letters stay
_TRAILING = ".,;:)]}>"
_DIGIT_GROUPS = re.compile(r"(?:[ \-]\d+)+(?![\w\-])")
_SECRETISH = re.compile(r"(?=.*[0-9])(?=.*[^\W\d_])|[^\w\s\-'’]|(?=.*[a-z]).[A-Z]")
_DESCRIBING = re.compile(DESCRIBING)
_UNIT_AFTER = re.compile(rf"(?i)[ \t]*(?:{UNITS})(?![^\W\d_])")
_SIZE = re.compile(rf"(?i)\d+\+?-?(?:{UNITS})")
_CLAUSE_END = re.compile(
    rf"(?i)(?:[ \t]*$|[ \t]*[\n.,;:!?)\]」』。、{_CJK}]|[ \t]+(?:and|but|so|or|then|now|btw|please|if|because|"
    r"which|though|when|for|et|mais|donc|und|aber|oder|y|pero|e|mas|ou|ma|per|pour|für|para|—|–|-)(?!\w))"
)
_CODE = re.compile(r"[#*]?(?P<v>\d(?:[ \-./]?\d){2,11}(?![\d/])|(?=(?:[A-Z]*\d){3})[A-Z0-9]{3,10}(?![\w\-]))[#*]?")
_ARTICLE = re.compile(r"(?i)(?:the|le|la|die|der|el|il|o|a)[ \t]+(?=[#*]?\d)")
_AWS = re.compile(r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_LONG = re.compile(r"(?:0x)?[A-Za-z0-9+/=]{32,}")
_ID = re.compile(r"[A-Z0-9]+(?:[ \-.][A-Z0-9]+){0,7}(?![\w\-])")
_LIST_ITEM = re.compile(r"(?=[A-Za-z\-]*\d)[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*(?![\w\-])")
_LIST_SEP = re.compile(r"[ \t]*[,;]?[ \t]*")
_WORD = re.compile(r"[^\W\d_][\w'’\-]*")
_JA_RUN = re.compile(r"[\u30a0-\u30ff\u3400-\u9fffA-Za-z0-9ー]+")


def unit_after(text: str, end: int) -> bool:
    """Whether a unit follows the number ending at `end` ("249 dollars", "8 characters")."""
    return bool(_UNIT_AFTER.match(text, end))


def clause_ends(text: str, pos: int) -> bool:
    """Whether the sentence's clause ends at `pos` (the end, a mark, a conjunction, Japanese)."""
    return bool(_CLAUSE_END.match(text, pos))


def _quoted(tail: str) -> Span | None:
    m = _QUOTED.match(tail)
    if m is None or is_placeholder(m.group("q")) or m.group("q").startswith("[REDACTED"):
        return None
    return m.span("q")


def _unit_follows(tail: str, end: int) -> bool:
    return bool(_UNIT_AFTER.match(tail, end)) or tail[end : end + 2] in (":0", ":1", ":2", ":3", ":4", ":5")


def token(tail: str) -> Span | None:
    """The first word of `tail` as a span, trailing punctuation left out, digit groups kept."""
    m = _TOKEN.match(tail)
    if m is None:
        return None
    end = m.start() + len(m.group(0).rstrip(_TRAILING))
    if end <= m.start() or "[REDACTED" in m.group(0):
        return None
    if tail[m.start() : end].isdigit() and (g := _DIGIT_GROUPS.match(tail, end)):
        end = g.end()
    return m.start(), end


def secretish(value: str) -> bool:
    """A value that reads as made up: letters and digits, a symbol, or a change of case."""
    return bool(_SECRETISH.search(value)) and not _SIZE.fullmatch(value)


def word(tail: str, how: str) -> Span | None:
    """A password: quoted, a made-up token, digits, or a plain word ending its clause."""
    if (q := _quoted(tail)) is not None:
        return q
    span = token(tail)
    if span is None:
        return None
    value = tail[span[0] : span[1]]
    lowered = value.lower()
    if is_placeholder(value) or value.startswith("[REDACTED") or lowered in NOT_A_VALUE:
        return None
    if not any(ch.isalnum() for ch in value):
        return None
    if is_code(value, "password") or "://" in value or _unit_follows(tail, span[1]):
        return None
    digits = value.replace(" ", "").replace("-", "")
    if digits.isdigit():  # "the password is 4471"; "PW 2024" is a year, "password 123456" a password
        return span if len(digits) >= (6 if how == "bare" else 4) and how != "to" else None
    if secretish(value):
        return span if how not in ("bare", "line") or len(value) >= 5 else None
    if how != "verb" or len(value) < 4 or _DESCRIBING.fullmatch(lowered) or not value.isalpha():
        return None
    return span if clause_ends(tail, span[1]) else None


def code(tail: str, how: str, low: int = 3, high: int = 12) -> Span | None:
    """A PIN, a door, alarm, safe or locker code: digits (maybe grouped), or a short code of
    capitals and digits ("4512B"), not a size, a time or a price."""
    if (q := _quoted(tail)) is not None:
        return q if sum(ch.isdigit() for ch in tail[q[0] : q[1]]) >= low else None
    article = _ARTICLE.match(tail)  # "est le 0909", "ist die 4711"
    m = _CODE.match(tail, article.end() if article else 0)
    if m is None:
        return None
    digits = sum(ch.isdigit() for ch in m.group("v"))
    if not low <= digits <= high or _unit_follows(tail, m.end()) or tail[m.end() : m.end() + 1] in ("%", "€", "$"):
        return None
    return m.span("v")


def cvv(tail: str, how: str) -> Span | None:
    return code(tail, how, 3, 4)


def otp(tail: str, how: str) -> Span | None:
    """A one-time code: digits, or a token of letters and digits."""
    if (span := code(tail, how, 4, 10)) is not None:
        return span
    span = token(tail)
    if span is None or how in ("to",):
        return None
    value = tail[span[0] : span[1]]
    return span if sum(ch.isdigit() for ch in value) >= 3 and secretish(value) else None


def code_list(tail: str, how: str) -> Span | None:
    """Recovery or backup codes: one or more tokens of letters and digits, or digits,
    separated by commas or spaces."""
    first = _LIST_ITEM.match(tail)
    digits = sum(c.isdigit() for c in first.group(0)) if first is not None else 0
    if first is not None and len(first.group(0)) >= 6 and (secretish(first.group(0)) or digits >= 6):
        span: Span | None = first.span()
    else:
        span = otp(tail, how)
    if span is None:
        return None
    start, end = span
    while m := _LIST_SEP.match(tail, end):
        item = _LIST_ITEM.match(tail, m.end())
        if item is None or len(item.group(0)) < 6:
            break
        end = item.end()
    return start, end


def answer(tail: str, how: str) -> Span | None:
    """A security answer: quoted, or one to three words ending the clause."""
    if (q := _quoted(tail)) is not None:
        return q
    if (ja := _JA_RUN.match(tail)) is not None and re.match(rf"[{_CJK}]", tail):
        return ja.span()
    words: list[re.Match[str]] = []
    pos = 0
    while len(words) < 3 and (m := _WORD.match(tail, pos)):
        words.append(m)
        pos = m.end()
        if clause_ends(tail, pos):
            break
        sp = re.compile(r"[ \t]+").match(tail, pos)
        pos = sp.end() if sp else pos
    if not words or words[0].group(0).lower() in NOT_A_VALUE or how in ("to", "bare"):
        return None
    end = words[-1].end()
    return (0, end) if clause_ends(tail, end) else None


def phrase(tail: str, how: str) -> Span | None:
    """A passphrase: quoted, plain words up to the end of the clause, or one made-up token."""
    if (q := _quoted(tail)) is not None:
        return q
    m = re.compile(r"[^\W\d_][\w'’\-]*(?:[ \t]+[^\W\d_][\w'’\-]*){1,23}").match(tail)
    if m is not None and clause_ends(tail, m.end()) and how in ("verb", "line"):
        words = [w.lower() for w in m.group(0).split()]
        describing = sum(w in NOT_A_VALUE for w in words)  # "is correct", "is under the mat"
        if not any(w in FUNCTION_WORDS for w in words) and (describing == 0 or 2 * describing < len(words) - 1):
            return m.span()  # "correct horse battery staple": words, not a sentence
    return word(tail, how)


def aws(tail: str, how: str) -> Span | None:
    """An AWS secret access key (40 characters) after its label, or another made-up token."""
    m = _AWS.match(tail.lstrip("\"'`"))
    if m is not None and secretish(m.group(0)):
        skip = len(tail) - len(tail.lstrip("\"'`"))
        return skip, skip + 40
    span = word(tail, how)
    return span if span is not None and span[1] - span[0] >= 16 else None


def long_key(tail: str, how: str) -> Span | None:
    m = _LONG.match(tail)
    return m.span() if m is not None and secretish(m.group(0)) else None


def national_id(tail: str, how: str) -> Span | None:
    """A national id: capitals and digits, maybe grouped, with five digits or more."""
    m = _ID.match(tail)
    if m is None or sum(ch.isdigit() for ch in m.group(0)) < 5 or _unit_follows(tail, m.end()):
        return None
    return m.span()


def login(tail: str, how: str) -> Span | None:
    """Credentials given as "user / password"."""
    m = re.compile(r"[^\s/|:]+[ \t]*[/|][ \t]*").match(tail)
    if m is None:
        return None
    span = word(tail[m.end() :], "verb")
    return (m.end() + span[0], m.end() + span[1]) if span is not None else None


SHAPES: dict[str, Callable[[str, str], Span | None]] = {
    "word": word,
    "key": word,
    "code": code,
    "otp": otp,
    "list": code_list,
    "answer": answer,
    "phrase": phrase,
    "aws": aws,
    "long": long_key,
    "id": national_id,
    "login": login,
}
"""The shape of each head family (`secret_words.HEADS`)."""

KIND_SHAPES: dict[str, Callable[[str, str], Span | None]] = {"cvv": cvv}
"""Shapes a kind narrows further than its family's."""
