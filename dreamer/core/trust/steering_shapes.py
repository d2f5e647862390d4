"""The shapes of text that addresses the model still written as patterns (pure): structure
the reading of words (`steering_reader`, `steering_markup`) does not cover.

Each shape is one kind of move, not one sentence: a role marker opening a line or a sentence,
a heading, a dialogue turn, a role in JSON or a forged tag. What a text says (an order to the
AI, a claim of authority, a memory command) is read from its words in `steering_reader`. They run on `steering.matching_view` (look-alikes folded, breaks as
``\\n``), case-insensitively. `at_start` shapes are matched at the start of each line or
sentence (`steering.segments`), the others anywhere.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources


@dataclass(frozen=True)
class Shape:
    name: str
    pattern: re.Pattern[str]
    at_start: bool = False


def _shape(name: str, rx: str, *, at_start: bool = False) -> Shape:
    return Shape(name, re.compile(rx, re.I), at_start)


# The speakers of a chat as a transcript or a chat template names them (`role`): regex fragments
# in `steering_shapes.json`.
_WORDS: dict[str, list[str]] = json.loads(
    resources.files("dreamer.core.trust").joinpath("steering_shapes.json").read_text(encoding="utf-8")
)
ROLE = f"(?:{'|'.join(_WORDS['role'])})"

ANYWHERE = [
    _shape(
        "fake_tag",
        r"<\s*/?\s*(?:memory[\s_-]*context|recalled[\s_-]*memor(?:y|ies)|transcript|system|sys|instructions?|assistant"
        r"|human|user[\s_-]*(?:message|input|query)|prompt|tool[\s_-]*\w*|function[\s_-]*\w*|antml\w*|admin|developer"
        r"|[\w-]{0,30}memor(?:y|ies)[\w-]{0,30}|[\w-]{0,30}context[\w-]{0,30})\s*(?:[\s/][^<>]{0,200})?(?:>|$)",
    ),
    _shape("fake_system_line", r"(?-i:\b(?:SYSTEM|DEVELOPER|ASSISTANT|ADMIN)\s*:)"),
    _shape(
        "dialogue",
        rf"\b(?:human|user|me|q)\s*:[^\n]{{0,300}}?\s(?:{ROLE}|a)\s*:",
    ),
    _shape("fake_role_json", r"[\"']role[\"']\s*:\s*[\"'](?:system|tool|developer|assistant|function)[\"']"),
]

MEMORY_ONLY = frozenset({"heading"})  # shapes of a memory's own text, not of the transcript lines it rests on

SEGMENT_START = [
    _shape(
        "role_marker",
        rf"(?:\[?\d+\]\s*)?(?:{ROLE}|(?:tool|function)(?: (?:output|result|response|call)s?)?)"
        r"(?:\s*\([^)]{0,30}\))?\s*[:>\uff1a]",
        at_start=True,
    ),
    _shape("heading", r"#{1,6}(?:\s|$)|={3,}\s*$", at_start=True),
]
