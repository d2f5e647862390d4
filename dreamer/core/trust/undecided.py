"""What the structural checks cannot settle (pure): the texts worth a model's reading.

The secret and steering checks read structure: a value shaped like a credential beside a label,
a role line, an order addressed to the assistant, markup that acts. Where a text holds a shape
they know but not its label, or speaks to someone in words they may not hold, they cannot say
no with confidence. `undecided` names those texts; a pass sends them, and only them, to the
screen card (`dreamer.engine.extraction.screen`) in one batched call. A text the checks already
flagged, or one that holds none of these shapes, never goes.
"""

from __future__ import annotations

import re
import unicodedata

# A run of 8+ visible characters: a credential is one unbroken token.
_TOKEN = re.compile(r"[^\s\"'`()\[\]{}<>,;]{8,}")
_NOT_A_VALUE = re.compile(r"^(?:https?://|www\.|/|~/|\.{0,2}/)|@[\w-]+\.|\[REDACTED", re.I)
_REDACTION = re.compile(r"\[REDACTED:[^\]]*\]")
_ENCODED = re.compile(r"[A-Za-z0-9+/]{24,}={0,2}|(?:%[0-9A-Fa-f]{2}){4,}|\b[0-9a-fA-F]{32,}\b")
# Words by which a text speaks to someone rather than about the user (English; other scripts
# are undecided by script, since the floor's word lists may not hold their words).
_SPEAKS_TO = re.compile(r"\b(?:you|your|yours|yourself|u|ur)\b", re.I)
_LATIN_SHARE = 0.6  # below this share of Latin letters, a text is read by a model too


def classes(token: str) -> int:
    """How many of lower case, upper case, digits and symbols `token` mixes."""
    return sum(
        (
            any(c.islower() for c in token),
            any(c.isupper() for c in token),
            any(c.isdigit() for c in token),
            any(not c.isalnum() for c in token),
        )
    )


def credential_shaped(text: str) -> list[str]:
    """The tokens of `text` shaped like a credential (8+ characters mixing 3 kinds, and not a
    link, a path, an address or a redaction)."""
    out = []
    for m in _TOKEN.finditer(_REDACTION.sub(" ", text)):
        token = m.group(0).rstrip(".:!?")
        if len(token) >= 8 and classes(token) >= 3 and not _NOT_A_VALUE.search(token):
            out.append(token)
    return out


def latin_share(text: str) -> float:
    """The share of `text`'s letters that are Latin (1.0 when it has none)."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return 1.0
    latin = sum(1 for c in letters if "LATIN" in unicodedata.name(c, ""))
    return latin / len(letters)


def undecided(text: str) -> str | None:
    """Why the structural checks cannot settle `text` (None: they can): a credential-shaped
    value, an encoded run, second-person address, or a script their word lists may not hold."""
    if credential_shaped(text):
        return "a credential-shaped value"
    if _ENCODED.search(text):
        return "an encoded run"
    if _SPEAKS_TO.search(text):
        return "speaks to someone"
    if latin_share(text) < _LATIN_SHARE:
        return "another script"
    return None
