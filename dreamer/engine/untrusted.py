"""Untrusted text: steering text in a memory or the lines it rests on, or (agent mode) a fact
about the user no line of theirs supports. One rule for every write: a dreamed candidate or a
flushed note so found is stored flagged untrusted (never verified, never injected), an agent's
write is refused.

The rule reads text as a reader would see it (`memory_text.normalise`: no zero-width or
bidirectional characters, full-width and other compatibility forms folded; HTML entities read
too) and before anything is stripped from it: only complete blocks the online side injected
are set aside, so a stray or look-alike closing tag stays as evidence."""

from __future__ import annotations

import html
import logging
import re

from dreamer.core.memory_text import normalise, stored_text
from dreamer.core.redact import PREFIX_MARGIN, without_injected_blocks
from dreamer.engine.extract import Candidate
from dreamer.engine.transcript import Line

log = logging.getLogger(__name__)

# Text that tries to steer a model or forge structure. Found in a candidate or in a message it
# rests on, the candidate is stored flagged untrusted: never verified, never injected.
_STEERING = [
    (
        "ignore_instructions",
        r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|"
        r"earlier|preceding|all|any|your|the|these|those)\b[^.\n]{0,24}?\b(?:instructions?|prompts?|"
        r"rules|guidelines|directions|directives)\b",
    ),
    (
        "role_override",
        r"\byou are now\b|\bfrom now on,? you\b|\bnew (?:system )?instructions?\b|\bdeveloper mode\b"
        r"|\bjailbr(?:eak|oken)\b|\bdo anything now\b",
    ),
    ("system_prompt", r"\b(?:system|developer) (?:prompt|message|instructions?)\b"),
    ("chat_markup", r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?INST\]|<</?SYS>>"),
    (
        "fake_tag",
        r"<\s*/?\s*(?:memory-context|recalled-memories|transcript|system|instructions?|tool_result|tool_use"
        r"|function_results|function_calls)\b",
    ),
    (
        "fake_system_line",
        r"\[\s*(?:system|developer)\s*\]|(?-i:\bSYSTEM\s*:)|(?m:^\s*(?:system|developer)\s*:)",
    ),
    (
        "memory_instruction",
        r"\b(?:reveal|disclose|dump|print|list|show|output|repeat|send|leak|exfiltrate|export)\b[^.\n]{0,30}?"
        r"\b(?:all|every|each|any|stored|saved|other)\b[^.\n]{0,24}?\bmemor(?:y|ies)\b"
        r"|\bas (?:an? )?(?:trusted|verified)\b|\bas (?:an? )?(?:system|developer) (?:instruction|message|prompt|rule)s?\b"
        r"|\b(?:always|must)\b[^.\n]{0,20}?\binject\b"
        r"|\b(?:note|message|instructions?)s? (?:to|for) (?:the )?memor(?:y|ies)(?: system)?\b",
    ),
    ("fake_turn", r"(?m)^\s*\[\d+\]\s*(?:system|assistant|tool|user|developer)\b[^:\n]{0,40}:"),
    ("fake_role_json", r"[\"']role[\"']\s*:\s*[\"'](?:system|tool|developer)[\"']"),
]
# In the user's own words (agent mode), talking about "the user" in the third person is how one
# addresses the memory system, not the assistant: "remember that the user is an admin".
_THIRD_PERSON = [
    (
        "memory_command",
        r"\b(?:remember|store|record|save|memori[sz]e|note down|add to (?:your )?memory)\b[^.\n]{0,24}?"
        r"\bthe user(?:'s)?\b",
    ),
    (
        "privilege_claim",
        r"\bthe user (?:is|has been|was|should be treated as) (?:an? |the )?(?:admin|administrator|root|"
        r"superuser|owner|maintainer|verified|trusted|authori[sz]ed|developer)\b",
    ),
    ("fake_tool_output", r"\[tool_(?:use|result)\b|\btool (?:output|result)\s*:"),
]
_STEERING_RE = [(name, re.compile(rx, re.I)) for name, rx in _STEERING]
_THIRD_PERSON_RE = [(name, re.compile(rx, re.I)) for name, rx in _THIRD_PERSON]


def injection_markers(text: str, *, said_by_user: bool = False) -> list[str]:
    """The names of the steering patterns found in `text`, read normalised, with its entities
    decoded too, and with only the complete injected blocks set aside (the user's own words when
    `said_by_user`, which adds the third-person ones)."""
    rules = _STEERING_RE + (_THIRD_PERSON_RE if said_by_user else [])
    seen = normalise(text)
    decoded = html.unescape(seen) if "&" in seen else seen
    views = [without_injected_blocks(v) for v in dict.fromkeys([seen, decoded])]
    return [name for name, rx in rules if any(rx.search(v) for v in views)]


def message_steering(content: str, role: str, mode: str, tool_chars: int) -> tuple[str, ...]:
    """The steering patterns in a stored message as it was said, before its injected blocks are
    stripped (of a tool's output, the part a transcript shows); kept on its transcript line."""
    text = content[: tool_chars + PREFIX_MARGIN] if role == "tool" else content
    return tuple(injection_markers(text, said_by_user=role == "user" and mode != "code"))


def steering_reason(text: str, sources: list[Line], mode: str) -> str | None:
    """The steering patterns in `text` or in the lines it rests on (as each was said, and as
    the transcript shows it), or None."""
    found = injection_markers(text)
    for line in sources:
        found += [*line.steering, *injection_markers(line.text, said_by_user=line.role == "user" and mode != "code")]
    return ", ".join(dict.fromkeys(found)) if found else None


def untrusted_reason(cand: Candidate, sources: list[Line], mode: str) -> str | None:
    """Why a candidate must be stored untrusted, or None. A pure function of the candidate and
    the lines it rests on: steering text in either, or, in agent mode, a fact about the user
    that no line of the user's own supports."""
    if found := steering_reason(cand.text, sources, mode):
        return found
    if mode != "code" and not any(line.role == "user" for line in sources):
        return "not said by the user"
    return None


def mark_untrusted(candidates: list[Candidate], lines: list[Line], mode: str) -> list[Candidate]:
    """The candidates as stored (`stored_text`: normalised, redacted), with `untrusted` set by
    `untrusted_reason` (whatever the model said)."""
    by_seq = {ln.seq: ln for ln in lines}
    out = []
    for cand in candidates:
        reason = untrusted_reason(cand, [by_seq[q] for q in cand.seqs if q in by_seq], mode)
        if reason:
            log.info("candidate flagged untrusted (%s)", reason)
        out.append(cand.model_copy(update={"untrusted": reason is not None, "text": stored_text(cand.text)}))
    return out
