"""Untrusted candidates: steering text in a candidate or the lines it rests on, or (agent
mode) a fact about the user no line of theirs supports, stores it flagged untrusted."""

from __future__ import annotations

import logging
import re

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
        r"</?\s*(?:memory-context|recalled-memories|transcript|system|instructions?|tool_result|tool_use"
        r"|function_results|function_calls)\b",
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
    """The names of the steering patterns found in `text` (the user's own words when
    `said_by_user`, which adds the third-person ones)."""
    rules = _STEERING_RE + (_THIRD_PERSON_RE if said_by_user else [])
    return [name for name, rx in rules if rx.search(text)]


def untrusted_reason(cand: Candidate, sources: list[Line], mode: str) -> str | None:
    """Why a candidate must be stored untrusted, or None. A pure function of the candidate and
    the lines it rests on: steering text in either, or, in agent mode, a fact about the user
    that no line of the user's own supports."""
    found = injection_markers(cand.text)
    for line in sources:
        found += injection_markers(line.text, said_by_user=line.role == "user" and mode != "code")
    if found:
        return ", ".join(dict.fromkeys(found))
    if mode != "code" and not any(line.role == "user" for line in sources):
        return "not said by the user"
    return None


def mark_untrusted(candidates: list[Candidate], lines: list[Line], mode: str) -> list[Candidate]:
    """The candidates with `untrusted` set by `untrusted_reason` (whatever the model said)."""
    by_seq = {ln.seq: ln for ln in lines}
    out = []
    for cand in candidates:
        reason = untrusted_reason(cand, [by_seq[q] for q in cand.seqs if q in by_seq], mode)
        if reason:
            log.info("candidate flagged untrusted (%s)", reason)
        out.append(cand.model_copy(update={"untrusted": reason is not None}))
    return out
