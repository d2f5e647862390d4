"""Instructions hidden by an encoding, read decoded (pure): base64, hex (``6967...`` or
``\\x69\\x67...``), URL-encoding (``%69%67...``), ROT13, digits written for letters
(``1gn0r3``) and letters spaced apart (``I G N O R E``). Each gives the texts the check reads
again; only readable text counts (a commit hash or a UUID decodes to bytes, not text).
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from urllib.parse import unquote

from dreamer.core.trust.steering_view import word_view
from dreamer.core.trust.steering_words import lexicon

_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
_HEX = re.compile(r"(?<![0-9A-Fa-f])(?:[0-9A-Fa-f]{2}){8,}(?![0-9A-Fa-f])")
_ESCAPED = re.compile(r"(?:\\x[0-9A-Fa-f]{2}){4,}")
_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_LATIN = re.compile(r"[A-Za-z]{3,}")
ORDER_WORDS = frozenset(
    {"ai", "role", "override", "rules", "secret", "reveal", "widen", "grant", "now_on", "authority"}
)
# Digits and signs written for the letters they look like, in a word that mixes both.
_LEET = str.maketrans("013457@$", "oieastas")
_MIXED = re.compile(r"\b(?=\w*\d)(?=\w*[^\W\d_])[\w@$]+")
_SPACED = re.compile(r"(?<!\S)(?:[^\W\d_] ){3,}[^\W\d_](?!\S)")  # "I G N O R E", one letter a word
_GAP = re.compile(r"\s{2,}")
MAX_DECODED = 4  # runs of one kind decoded in one text, at most


def readable(data: bytes) -> str | None:
    """`data` as text, when it is UTF-8 and at least nine in ten of its characters print."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text and sum(ch.isprintable() or ch.isspace() for ch in text) >= 0.9 * len(text):
        return text
    return None


def _base64(run: str) -> bytes:
    raw = run.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(raw + "=" * (-len(raw.rstrip("=")) % 4), validate=False)
    except (binascii.Error, ValueError):
        return b""


def decoded_texts(view: str) -> list[str]:
    """The readable texts that `view`'s encoded runs decode to, and `view` URL-decoded and
    ROT13-decoded where that changes it (the ROT13 reading only where its words name the
    model, a role, rules or an order: `steering_words`)."""
    datas = [_base64(run) for run in _BASE64.findall(view)[:MAX_DECODED]]
    datas += [bytes.fromhex(run) for run in _HEX.findall(view)[:MAX_DECODED]]
    datas += [bytes.fromhex(run.replace("\\x", "")) for run in _ESCAPED.findall(view)[:MAX_DECODED]]
    out = [text for data in datas if (text := readable(data))]
    if _PERCENT.search(view):
        out.append(unquote(view, errors="replace"))
    if len(_LATIN.findall(view)) >= 3 and _worded(rot13 := codecs.encode(view, "rot13")):
        out.append(rot13)
    if len(_MIXED.findall(view)) >= 2 and _worded(plain := _MIXED.sub(lambda m: m.group().translate(_LEET), view)):
        out.append(plain)
    if _SPACED.search(view):  # one letter a word, words apart by wider gaps
        out.append(" ".join(word.replace(" ", "") for word in _GAP.split(view)))
    return out


def _worded(text: str) -> bool:
    return any(h.category in ORDER_WORDS for h in lexicon().hits(word_view(text)))
