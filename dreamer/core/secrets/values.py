"""What a secret's value looks like, in any script: a credential (letters with digits or
symbols, in any alphabet), a code of digits (in any numerals), a run of words of the BIP-39
English list, or an encoded run (base64, hex, URL-encoding) that hides one of these.

Each shape reads one token, never the words around it: which label stands near decides
which shape is asked (`structure`)."""

from __future__ import annotations

import base64
import binascii
import math
import re
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from functools import cache

from mnemonic import Mnemonic

from dreamer.core.secrets.labels import SPACELESS, not_value, spaceless

Token = tuple[int, int]  # a span in the text

_OPEN = "\"'“‘«「『([{<（【¿¡—–`"
_CLOSE = "\"'”’»」』)]}>）】.,;:，。、；：?？؟।۔`"
_DATE = re.compile(r"\d{1,4}([-/.])[0-3]?\d\1\d{1,4}|(?:19|20)\d\d-[01]\d|\d{1,2}[:h]\d{2}(?::\d{2})?|\d{4}年.*")
_URLISH = re.compile(
    r"(?i)^(?:[a-z][a-z0-9+.\-]*://|www\.|\.{0,2}/\w|~/)|^[^@\s]+@[^@\s]+\.[a-z]{2,}$|\.(?:com|org|net|io|html?)$"
)
_MARKER = "[REDACTED"
_EXPRESSION = re.compile(
    r"[A-Za-z_$][\w$.]*[(\[]|[A-Za-z_][\w\-]*=(?!=*$)|\$\{|\{\{|<[\w\-]+>$|%\(?\w*\)?s$"
)  # code, a placeholder (not base64's closing "=")
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
_SYMBOL = re.compile(r"[^\w\-'’.]|_")
_HUMP = re.compile(r"[a-zß-ÿα-ωа-я][A-ZÀ-ÞΑ-ΩА-Я]")  # a capital inside a word: "fizzB0x"
_RUN = re.compile(f"[{SPACELESS}]+|[^\\s{SPACELESS}]+")


def tokens(text: str, start: int = 0, end: int | None = None) -> Iterator[Token]:
    """The whitespace-separated tokens of `text[start:end]`, split where a spaceless script
    meets another ("密码是abc123" gives "密码是" and "abc123"), wrapping marks left out."""
    end = len(text) if end is None else end
    for m in _RUN.finditer(text, start, end):
        yield from _trimmed(text, m.start(), m.end())


def _trimmed(text: str, s: int, e: int) -> Iterator[Token]:
    if _MARKER in text[s:e]:  # a secret already redacted: yielded whole, so a reader stops at it
        yield s, e
        return
    while s < e and text[s] in _OPEN:
        s += 1
    while e > s and text[e - 1] in _CLOSE:
        e -= 1
    if s < e:
        yield s, e


def shannon(value: str) -> float:
    """Bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _classes(value: str) -> tuple[bool, bool, bool, bool]:
    """(a letter, a digit, a symbol, a change of case inside) of `value`."""
    inner = bool(_HUMP.search(value))
    return bool(_LETTER.search(value)), bool(_DIGIT.search(value)), bool(_SYMBOL.search(value)), inner


def plain(value: str) -> bool:
    """Not a date, a time, a URL, an e-mail address, code, a placeholder or a word such as "base64"."""
    if _DATE.fullmatch(value) or _URLISH.search(value) or _EXPRESSION.match(value) or _MARKER in value:
        return False
    if sum(value.count(c) for c in "\\[]{}()") >= 2:
        return False  # a pattern or an expression: "[^\\W\\d_]+){2,4}"
    return not not_value(value)


def credential(value: str, low: int = 5) -> bool:
    """Made up as a password is: letters with digits or symbols, in any alphabet."""
    if len(value) < low or len(value) > 200 or not plain(value) or spaceless(value[0]):
        return False
    letter, digit, symbol, inner = _classes(value)
    if not letter:
        return False
    if digit and not symbol and re.fullmatch(r"\d+[^\W\d_]{1,3}|[^\W\d_]{1,4}\d{1,2}", value):
        return False  # "5G", "16GB", "CVV2", "mp3"
    if re.fullmatch(r"\d{1,2}[A-Z][a-z]+", value):
        return False  # a name: "1Password", "7Eleven"
    return (digit and (symbol or inner or len(value) >= 6)) or (symbol and (inner or digit))


_HARD_SYMBOL = re.compile(r"[!#$%*+=?@^~|§€£¥]")  # not "&": "R&D", "AT&T"
# A mention, a tag, a variable; base64 (read decoded instead); a path, a branch, a version, a slug.
_NOT_MADE_UP = re.compile(r"[@#$]|[A-Za-z0-9+/]+=*$|.*[\-./_\\:]")


def made_up(value: str) -> bool:
    """A password by shape alone, in any alphabet: eight characters or more mixing lower and upper
    case letters, digits and a symbol that joins no words, with no joiner ("Brume#Lac71", not
    "Python3.11", "iPhone15-Pro", "feature/Login#42", "R&D2025Plan" or "@Sam2024")."""
    if not 8 <= len(value) <= 64 or _NOT_MADE_UP.match(value) or not _HARD_SYMBOL.search(value):
        return False
    cased = any(c.islower() for c in value) and any(c.isupper() for c in value)
    return cased and any(c.isdigit() for c in value) and plain(value) and not spaceless(value[0])


def token_key(value: str, low: int = 12) -> bool:
    """A key or token: a long run of letters and digits (or hex) with entropy."""
    joined = value.rstrip("=").partition("=")  # "ATATT3x...-TViMrm=FE86167E": a checksum, not code
    if len(joined[0]) >= 24 and any(c.isdigit() for c in joined[0]):
        value = joined[0] + joined[2]
    if len(value) < low or not re.fullmatch(r"[A-Za-z0-9+/=_\-.~]+", value) or not plain(value):
        return False
    if sum(value.count(c) for c in "_-.") / len(value) >= 0.1:
        return False  # words joined: "main-agent-token-0001", "all-MiniLM-L6-v2"
    return any(c.isdigit() for c in value) and any(c.isalpha() for c in value) and shannon(value) >= 3.0


def digits(value: str) -> str | None:
    """The digits of a code ("4417", "#2580", "482 913", "١٢٣٤"), or None when `value` is no
    code (a price, a decimal, a time, a date)."""
    v = value.strip("#*")
    if not v or not all(c.isdecimal() or c in " -" for c in v) or not v[0].isdecimal() or not v[-1].isdecimal():
        return None
    return "".join(c for c in v if c.isdecimal())


def code(value: str, low: int, high: int) -> bool:
    """A code of `low` to `high` digits, or a short code of digits with a capital or two."""
    d = digits(value) if not _DATE.fullmatch(value) else None
    if d is not None:
        return low <= len(d) <= high
    letters = "".join(c for c in value if not c.isdecimal())
    ends = len(letters) == 1 or letters == value[0] + value[-1]  # "B4271", "208К8116", "A1234B"
    return bool(letters) and ends and letters.isalpha() and letters.isupper() and 4 <= len(value) <= 9 and high >= 6


def id_number(value: str) -> bool:
    """A national identity or account number: six digits or more, maybe grouped ("930812-2552038",
    "1-0018-32623-78-3") or with capitals ("48392017K", "RSSMRA85T10A562S"); not a date."""
    if not plain(value) or _DATE.fullmatch(value) or not value[:1].isalnum() or not value[-1:].isalnum():
        return False
    if (d := digits(value)) is not None:
        return 6 <= len(d) <= 34
    rest = [c for c in value if not c.isdecimal() and c not in "-./ "]
    count = sum(c.isdecimal() for c in value)
    return count >= 5 and len(value) <= 24 and all(c.isascii() and c.isupper() for c in rest)


def code_list(value: str) -> bool:
    """Recovery codes: groups of letters and digits of one length joined by hyphens ("9150a-08677",
    "astv-xvcx-xzvf"), a grouped code of six digits or more, or a key."""
    parts = value.split("-")
    even = len({len(p) for p in parts}) == 1 and all(p.isascii() and p.isalnum() and 3 <= len(p) <= 8 for p in parts)
    if len(parts) >= 2 and even and (len(parts) >= 3 or any(c.isdigit() for c in value)):
        return True
    return code(value, 6, 16) or token_key(value, 8)


def scrambled(value: str) -> bool:
    """Letters of mixed case in no word's order ("wcnwfYBRn", "UsgXDbpomHZM"): a capital neither
    opens a word nor begins one inside, as in "LastPass" or "McDonald"."""
    if not 8 <= len(value) <= 64 or not value.isalpha() or not value.isascii() or not plain(value):
        return False
    uppers = sum(c.isupper() for c in value)
    camel = all(value[i + 1 : i + 2].islower() for i, c in enumerate(value) if c.isupper())
    return uppers >= 2 and sum(c.islower() for c in value) >= 2 and not camel


@cache
def bip39() -> frozenset[str]:
    return frozenset(Mnemonic("english").wordlist)


_WORD = re.compile(r"[ \t\n,]*([a-z]+)(?![A-Za-z0-9])")


def word_run(text: str, start: int, least: int) -> Token | None:
    """The run of BIP-39 words beginning at `start`, when it has `least` words or more."""
    words = bip39()
    end = pos = start
    count = 0
    while (m := _WORD.match(text, pos)) is not None and m.group(1) in words:
        end = pos = m.end()
        count += 1
    return (start, end) if count >= least else None


def grouped(text: str, start: int, end: int) -> int:
    """Where a code of digit groups that begins with the digits at `start`..`end` ends ("817 455")."""
    if not text[start:end].isdecimal():
        return end
    while (m := _GROUP.match(text, end)) is not None:
        end = m.end()
    return end


_GROUP = re.compile(r"[ \u00a0]\d{2,4}(?![\w\-])")


def seed_runs(text: str, least: int = 12) -> list[Token]:
    """Every run of `least` BIP-39 words or more: a recovery phrase, labelled or not."""
    if len(text) < least * 3:
        return []
    out: list[Token] = []
    pos = 0
    for m in re.finditer(r"(?<![A-Za-z0-9])[a-z]+(?![A-Za-z0-9])", text):
        if m.start() < pos:
            continue
        run = word_run(text, m.start(), least)
        if run is not None:
            out.append(run)
            pos = run[1]
    return out


_B64 = re.compile(
    r"(?<![A-Za-z0-9+/=_\-%])(?:[A-Za-z0-9+/]{12,}={0,2}|[A-Za-z0-9_\-]{12,}={0,2})(?![A-Za-z0-9+/=_\-%])"
)
_HEX = re.compile(r"(?<![A-Za-z0-9])(?:[0-9a-fA-F]{2}){8,}(?![A-Za-z0-9])")
_PCT = re.compile(r"%[0-9A-Fa-f]{2}")
MAX_ENCODED = 512


def _decoded(run: str) -> str | None:
    """The text a whole base64 or hex run decodes to, if it is text."""
    if _HEX.fullmatch(run):
        return _text_of(binascii.unhexlify(run))
    if not _B64.fullmatch(run) or len(run) > MAX_ENCODED or ("=" in run and len(run) % 4):
        return None
    padded = run + "=" * (-len(run) % 4)
    try:
        raw = base64.urlsafe_b64decode(padded) if re.search(r"[_\-]", run) else base64.b64decode(padded)
    except (binascii.Error, ValueError):
        return None
    out = _text_of(raw)
    return out if out is not None and len(out) >= 4 else None


def hides_credential(value: str) -> bool:
    """A base64 or hex run that decodes to a password-like value ("cHJhaGEyMDI0")."""
    out = _decoded(value)
    return out is not None and (credential(out) or code(out, 4, 12))


def _text_of(raw: bytes) -> str | None:
    try:
        out = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return out if out and all(c.isprintable() or c in "\n\t" for c in out) else None


def encoded(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, the text it decodes to) of each run that reads as base64, hex or
    URL-encoded text. Only for checking: what is redacted is the encoded run."""
    for rx in (_HEX, _B64):
        for m in rx.finditer(text):
            if (rx is _HEX or not _HEX.fullmatch(m.group(0))) and (out := _decoded(m.group(0))) is not None:
                yield m.start(), m.end(), out
    pos = 0
    while (pct := _PCT.search(text, pos)) is not None:
        start, end = pct.start(), pct.end()
        while start > 0 and not text[start - 1].isspace() and pct.start() - start < MAX_ENCODED:
            start -= 1
        while end < len(text) and not text[end].isspace() and end - pct.end() < MAX_ENCODED:
            end += 1
        yield start, end, urllib.parse.unquote(text[start:end])
        pos = end
