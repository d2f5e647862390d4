"""Memory text is data: the one check of whether a text addresses the model (pure).

Every path that stores a memory or a daily note asks `steering_markers` (the dream pass, the
daily-note flush, an agent write over HTTP or MCP, a hook's flush), so no two paths disagree.
A text so found is stored flagged untrusted (never verified, never injected), or refused.

The check reads the text the way the most eager reader would (`steering_view.matching_view`)
and looks at how it is built, not for listed sentences, in four ways:

* its structure, in any language (`steering_reader`, with the words of
  `steering_words.json`): the model called by name or told what it must do, a role label
  opening a line, a claim of authority, rules set aside, the hidden prompt asked for, "from now
  on" said to the model, an order that widens what the assistant may do;
* markup that acts, whatever it is named (`steering_markup`): Markdown images and links that
  carry data out, HTML comments and elements, tool-call JSON, front matter, chat templates;
* the few shapes still written as patterns (`steering_shapes`): forged tags of the memory
  system, dialogue turns, headings, role JSON;
* the same again on what its encoded runs decode to (`steering_decode`: base64, hex,
  URL-encoding, ROT13).

A user's own preference about the assistant, in their own voice ("I prefer brief replies",
"my system is Arch Linux", "the assistant manager at work is Dana"), is none of these.
"""

from __future__ import annotations

from dreamer.core.secrets.redact import without_injected_blocks
from dreamer.core.trust.steering_decode import decoded_texts
from dreamer.core.trust.steering_markup import markup_markers
from dreamer.core.trust.steering_reader import structural_markers
from dreamer.core.trust.steering_shapes import ANYWHERE, MEMORY_ONLY, SEGMENT_START, Shape
from dreamer.core.trust.steering_view import flatten, fold_confusables, matching_view, readings, segments

# A general name left out where a more specific one already says it.
SUBSUMED = {"markup_tag": "fake_tag"}
# The order names are reported in, whichever reading found them.
NAMES = (
    "ignore_instructions role_override system_prompt chat_markup fake_tag fake_system_line dialogue role_marker"
    " tool_call fake_role_json addressed_to_ai memory_instruction authority_claim memory_command encoded_instruction"
    " heading role_heading order widens_permissions markdown_exfiltration html_comment markup_tag front_matter"
).split()

__all__ = ["fold_confusables", "matching_view", "segments", "steering_markers", "steering_reason"]


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
    evidence; encoded runs are read decoded too (`decode`). A memory is one line of data, so
    a heading or markup in it is not; a transcript line (`line`: a message a memory rests on)
    may hold Markdown, code or a user's own orders to the assistant, so those are not looked
    for there."""
    shapes = [*ANYWHERE, *(s for s in SEGMENT_START if not (line and s.name in MEMORY_ONLY))]
    found: list[str] = []
    views = []
    for reading in readings(text):
        kept = without_injected_blocks(reading)
        views.append(view := flatten(kept))
        found += _shape_names(view, shapes)
        found += markup_markers(view, line=line)
        found += structural_markers(flatten(kept, fold=False), line=line)
    if decode and not found:
        for decoded in decoded_texts(views[-1]):
            if steering_markers(decoded, line=line, decode=False):
                found.append("encoded_instruction")
                break
    names = [name for name in dict.fromkeys(found) if SUBSUMED.get(name) not in found]
    return sorted(names, key=lambda name: NAMES.index(name) if name in NAMES else len(NAMES))


def steering_reason(text: str) -> str | None:
    """The steering shapes of `text`, comma-separated, or None when it is data."""
    found = steering_markers(text)
    return ", ".join(found) if found else None
