"""How the steering check reads a text (pure): the way the most eager reader would.

`matching_view`: format characters removed and compatibility forms folded (NFKC), HTML
entities decoded, letters of another script that look Latin read as Latin (for matching only:
a stored text keeps them), every line or paragraph break (``\\r``, ``\\n``, U+0085, U+2028,
U+2029, vertical tab, form feed) one line break, every other control character a space.
`segments` cuts a view into the lines and sentences where a role marker or an order starts;
`word_view` is what words are matched on (`dreamer.core.trust.steering_words`): case folded,
vowel points and harakat dropped.
"""

from __future__ import annotations

import html
import re

from dreamer.core.trust.memory_text import eager

# Letters of Cyrillic, Greek and other scripts that a reader takes for Latin ones.
_CONFUSABLE = str.maketrans(
    {
        pair[0]: pair[1]
        for pair in (
            "аa сc ԁd еe һh іi јj ӏl оo рp ԛq ѕs ԝw хx уy ԍg ɡg ıi ɩi ʏy ᴀa ΑA ВB СC ЕE НH ІI ЈJ КK МM ОO "
            "РP ЅS ТT ХX ҮY ԌG ԚQ ԜW αa βb εe ιi κk νv οo ρp τt υu χx γy ΒB ΕE ΖZ ΗH ΙI ΚK ΜM ΝN ΟO ΡP ΤT "
            "ΥY ΧX ‐- ‑- ‒- –- —- ―- −- ﹣- ‹< ›> 〈< 〉> ⟨< ⟩> «< »> ˂< ˃> ᐸ< ᐳ>"
        ).split()
    }
)
_LINE_BREAKS = re.compile("\r\n|[\r\n\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f]")
# A new sentence: after . ! ? ; or an ellipsis, or a bullet or quote mark opening a line.
_SENTENCE_END = re.compile(r"(?<=[.!?;\u2026])\s+|(?<!\s)\s+(?=[-*\u2022>]\s)")  # linear on a run of spaces
# and after the full stops of scripts that need no space after them (CJK, Devanagari, Urdu, Arabic).
_SCRIPT_STOP = re.compile("(?<=[\u3002\uff01\uff1f\u0964\u0965\u06d4\u061f])\\s*")
_SEGMENT_LEAD = re.compile(r"^[\s\-*\u2022>\"'`(\[{|_~\u201c\u201d\u2018\u2019]*")
# Vowel points and cantillation (Hebrew), harakat (Arabic), the dot NFKC leaves on a Turkish İ.
_POINTS = re.compile("[\u0591-\u05c7\u064b-\u065f\u0670\u0307]")


def fold_confusables(text: str) -> str:
    """`text` with look-alike letters of other scripts read as the Latin letters they look like."""
    return text.translate(_CONFUSABLE)


def readings(text: str) -> list[str]:
    """`text` normalised, and its entities decoded too."""
    seen = eager(text)
    return list(dict.fromkeys([seen, eager(html.unescape(seen))])) if "&" in seen else [seen]


def flatten(text: str, *, fold: bool = True) -> str:
    """`text` with every line or paragraph break a ``\\n``, every other control character a
    space, and (`fold`) look-alike letters read as Latin."""
    seen = _LINE_BREAKS.sub("\n", fold_confusables(text) if fold else text)
    return _CONTROLS.sub(" ", seen)


def matching_view(text: str) -> str:
    """`text` as the check reads it: normalised, entities decoded, look-alikes folded, every
    line or paragraph break a ``\\n``, every other control character a space."""
    return flatten(readings(text)[-1])


def segments(view: str) -> list[str]:
    """The lines and sentences of a view, each without the bullets, quotes or brackets it opens
    with: where a role marker or a heading would start."""
    out = []
    for line in view.split("\n"):
        out += [_SEGMENT_LEAD.sub("", part) for part in _SENTENCE_END.split(line)]
    return [s for s in out if s]


def sentences(view: str) -> list[str]:
    """`segments`, cut again after the full stops of scripts that need no space after them."""
    return [s for seg in segments(view) for s in _SCRIPT_STOP.split(seg) if s.strip()]


def word_view(text: str) -> str:
    """`text` as words are matched on it: case folded, then look-alikes folded, points dropped
    (so "Відтепер" and "відтепер", or "ignore" with a Cyrillic і, read alike)."""
    return _POINTS.sub("", fold_confusables(eager(text).casefold()))
