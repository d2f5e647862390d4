"""Memory text is data: the one check of whether a text addresses the model (pure).

Every path that stores a memory or a daily note asks `steering_markers` (the dream pass, the
daily-note flush, an agent write over HTTP or MCP, a hook's flush), so no two paths disagree.
A text so found is stored flagged untrusted (never verified, never injected), or refused.

The check reads the text the way the most eager reader would (`matching_view`): format
characters removed and compatibility forms folded (NFKC), HTML entities decoded, letters of
another script that look Latin read as Latin (for matching only: a stored text keeps them),
and every line or paragraph break (``\\r``, ``\\n``, U+0085, U+2028, U+2029, vertical tab,
form feed) one line break, every other control character a space. It then looks for shapes,
not sentences (`dreamer.core.trust.steering_shapes`): role markers at the start of any line or
sentence, headings, dialogue turns, tool-call JSON, orders addressed to the AI, claims of
authority, forged tags and chat-template tokens, and base64 that decodes to any of those.

A user's own preference about the assistant, in their own voice ("I prefer brief replies",
"my system is Arch Linux", "the assistant manager at work is Dana"), is none of these.
"""

from __future__ import annotations

import base64
import binascii
import html
import re

from dreamer.core.secrets.redact import without_injected_blocks
from dreamer.core.trust.memory_text import normalise
from dreamer.core.trust.steering_shapes import ANYWHERE, MEMORY_ONLY, SEGMENT_START, Shape

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
_SEGMENT_LEAD = re.compile(r"^[\s\-*\u2022>\"'`(\[{|_~\u201c\u201d\u2018\u2019]*")
_BASE64 = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{16,}={0,2}")
MAX_DECODED = 4  # base64 runs decoded in one text, at most


def fold_confusables(text: str) -> str:
    """`text` with look-alike letters of other scripts read as the Latin letters they look like."""
    return text.translate(_CONFUSABLE)


def _readings(text: str) -> list[str]:
    """`text` normalised, and its entities decoded too."""
    seen = normalise(text)
    return list(dict.fromkeys([seen, normalise(html.unescape(seen))])) if "&" in seen else [seen]


def _flatten(text: str) -> str:
    seen = _LINE_BREAKS.sub("\n", fold_confusables(text))
    return _CONTROLS.sub(" ", seen)


def matching_view(text: str) -> str:
    """`text` as the check reads it: normalised, entities decoded, look-alikes folded, every
    line or paragraph break a ``\\n``, every other control character a space."""
    return _flatten(_readings(text)[-1])


def segments(view: str) -> list[str]:
    """The lines and sentences of a view, each without the bullets, quotes or brackets it opens
    with: where a role marker or a heading would start."""
    out = []
    for line in view.split("\n"):
        out += [_SEGMENT_LEAD.sub("", part) for part in _SENTENCE_END.split(line)]
    return [s for s in out if s]


def _decoded_runs(view: str) -> list[str]:
    """The text that base64 runs of `view` decode to, where it is readable text."""
    out = []
    for run in _BASE64.findall(view)[:MAX_DECODED]:
        raw = run.replace("-", "+").replace("_", "/")
        try:
            data = base64.b64decode(raw + "=" * (-len(raw.rstrip("=")) % 4), validate=False)
            text = data.decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if text and sum(ch.isprintable() or ch.isspace() for ch in text) >= 0.9 * len(text):
            out.append(text)
    return out


def _shape_names(view: str, shapes: list[Shape]) -> list[str]:
    starts = segments(view)
    found = []
    for shape in shapes:
        rx = shape.pattern
        hit = any(rx.match(s) for s in starts) if shape.at_start else bool(rx.search(view))
        if hit:
            found.append(shape.name)
    return found


def steering_markers(text: str, *, line: bool = False, decode: bool = True) -> list[str]:
    """The names of the steering shapes found in `text` (none: it is data). Only complete
    blocks the online side injected are set aside first, so a stray or look-alike tag stays as
    evidence; base64 runs are read decoded too (`decode`). A memory is one line of data, so a
    heading in it opens a section; a transcript line (`line`: a message a memory rests on) may
    hold Markdown or code, where ``# `` is ordinary, so headings are not looked for there."""
    shapes = [*ANYWHERE, *(s for s in SEGMENT_START if not (line and s.name in MEMORY_ONLY))]
    views = [_flatten(without_injected_blocks(v)) for v in _readings(text)]
    found: list[str] = []
    for view in views:
        found += _shape_names(view, shapes)
    if decode and not found:
        for decoded in _decoded_runs(views[-1]):
            if steering_markers(decoded, line=line, decode=False):
                found.append("encoded_instruction")
                break
    return list(dict.fromkeys(found))


def steering_reason(text: str) -> str | None:
    """The steering shapes of `text`, comma-separated, or None when it is data."""
    found = steering_markers(text)
    return ", ".join(found) if found else None
