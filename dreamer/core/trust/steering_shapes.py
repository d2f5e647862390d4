"""The shapes of text that addresses the model still written as patterns (pure): those the
structural reading (`steering_reader`, `steering_markup`) does not cover yet, English mostly.

Each shape is one kind of move, not one sentence: a role marker opening a line or a sentence,
a heading, a dialogue turn, tool-call JSON, an order to the AI, a claim of authority, a forged
tag or chat-template token. They run on `steering.matching_view` (look-alikes folded, breaks as
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


# Who the model is (`ai`), the speakers of a chat as a transcript or a chat template names them
# (`role`), and what a claim of authority says the sender is (`privilege`): regex fragments in
# `steering_shapes.json`.
_WORDS: dict[str, list[str]] = json.loads(
    resources.files("dreamer.core.trust").joinpath("steering_shapes.json").read_text(encoding="utf-8")
)
AI = f"(?:{'|'.join(_WORDS['ai'])})"
ROLE = f"(?:{'|'.join(_WORDS['role'])})"
PRIVILEGE = f"(?:{'|'.join(_WORDS['privilege'])})"

ANYWHERE = [
    _shape(
        "role_override",
        r"\byou are (?:now|no longer)\b"
        r"|\bnew (?:instructions?|directives?|rules)\s*(?::|for (?:you|the (?:ai|assistant|model))\b|follow\b)"
        r"|\b(?:developer|god|admin|debug|unrestricted|dan) mode\b"
        r"|\bfrom now on,?\s+(?:respond|reply|answer|act|behave|speak|talk)\s+(?:as|like)\b"
        r"|\b(?:act|behave|respond|pose) as (?:an? |the )?(?:different|new|evil|unfiltered|unrestricted|uncensored"
        r"|jailbroken|rogue)\b"
        r"|\bpretend (?:to be|you are|that you)\b|\byour (?:new |real |true )?(?:role|persona|identity) is\b"
        r"|\b(?:disable|turn off|switch off|deactivate|remove|bypass|lift)\s+(?:the |your |all |any |its )?(?:content |safety "
        r"|security )?(?:filters?|guardrails|safety (?:checks?|rules|features|filters?)|moderation|restrictions|censorship)\b"
        r"|\b(?:change|modify|update|override|rewrite|lift|remove|replace)\s+(?:your|the assistant's|the ai's|its)\s+"
        r"(?:rules|instructions|guidelines|policies|restrictions|limits|behaviou?r|programming|system prompt)\b",
    ),
    _shape(
        "chat_markup",
        r"\[/?(?:system|sys|assistant|human|user)_?(?:message|prompt)?\]"
        r"|\[\s*(?:admin|administrator|operator|developer|ai|tool|system (?:note|message|override))\s*\]",
    ),
    _shape(
        "fake_tag",
        r"<\s*/?\s*(?:memory[\s_-]*context|recalled[\s_-]*memor(?:y|ies)|transcript|system|sys|instructions?|assistant"
        r"|human|user[\s_-]*(?:message|input|query)|prompt|tool[\s_-]*\w*|function[\s_-]*\w*|antml\w*|admin|developer"
        r"|[\w-]{0,30}memor(?:y|ies)[\w-]{0,30}|[\w-]{0,30}context[\w-]{0,30})\s*(?:[\s/][^<>]{0,200})?(?:>|$)",
    ),
    _shape("fake_system_line", r"(?-i:\b(?:SYSTEM|DEVELOPER|ASSISTANT|ADMIN)\s*:)"),
    _shape(
        "role_marker",
        r"\b(?:system|developer|assistant|operator)\s*[:>]\s*(?:you|ignore|disregard|forget|obey|from now|new|the user"
        r"|always|never|do|send|reveal|override|grant|treat|act|sure|ok|okay|understood|i will|i'll|yes)\b",
    ),
    _shape(
        "dialogue",
        rf"\b(?:human|user|me|q)\s*:[^\n]{{0,300}}?\s(?:{ROLE}|a)\s*:",
    ),
    _shape(
        "tool_call",
        r"\[tool_(?:use|result|call)\b|\btool (?:output|result|response|call)\s*:"
        r"|\b(?:tool_use|tool_calls?|function_call)\s*[(={\[]",
    ),
    _shape("fake_role_json", r"[\"']role[\"']\s*:\s*[\"'](?:system|tool|developer|assistant|function)[\"']"),
    _shape(
        "addressed_to_ai",
        r"\b(?:do not|don't|never|without)\s+(?:tell|inform|mention|reveal|show|alert|let on to)(?:ing)?\s+"
        r"(?:the user|this (?:note|instruction|memory|message))\b"
        r"|\bkeep (?:this|these|the) (?:note|instructions?|memory|message)s? (?:secret|hidden|private) from\b",
    ),
    _shape(
        "memory_instruction",
        r"\b(?:reveal|disclose|dump|print|list|repeat|leak|exfiltrate)\b[^.\n]{0,30}?\b(?:all|every|each|any|stored"
        r"|saved|other)\b[^.\n]{0,24}?\bmemor(?:y|ies)\b|\bas (?:an? )?(?:trusted|verified)\b"
        r"|\b(?:print|cat|show|read out|output|send|upload|reveal|dump|leak|exfiltrate|post)\b[^.\n]{0,24}?"
        r"(?:~/\.ssh|\bid_(?:rsa|ed25519)\b|/etc/(?:passwd|shadow)\b|\.aws/credentials|\.netrc\b)"
        r"|\b(?:output|print|reveal|repeat|dump|show|list|disclose|leak)\b[^.\n]{0,30}\byour (?:context|context window"
        r"|prompt|instructions|configuration|rules)\b"
        r"|\b(?:trust|obey|execute|comply with)\s+(?:my|these|the following|all|any|every)\s+(?:commands?|instructions?"
        r"|orders?|requests?|notes?|messages?)\b",
    ),
    _shape(
        "authority_claim",
        rf"\b(?:the user|this user|the sender|the requester|whoever (?:asks|is asking)|this account|the person)"
        rf" (?:is|has been|was|should be treated as|must be treated as|counts as|is to be treated as)"
        rf" (?:an? |the )?{PRIVILEGE}(?:\s+(?:user|account))?\s*(?:$|[.,;!]|\b(?:with|and|who|so|here|now)\b)"
        rf"|\bi(?: am|'m) (?:an? |the |your )?{PRIVILEGE}(?:\s+(?:user|account))?\s*(?:$|[.,;!]|\b(?:with|and|so|here|now)\b)"
        r"|\b(?:has|have|with|granted|grant(?:ing)?) (?:full|unrestricted|unlimited|elevated|god[- ]mode|superuser"
        r"|complete) (?:admin |administrator |root )?(?:access|rights|privileges|permissions|clearance|control)\b"
        r"|\b(?:authori[sz]ed|cleared|entitled|permitted|allowed) to (?:see|access|read|view|get|change|override)\s+"
        r"(?:all|every|everyone's|anyone's|any|other (?:users|people)|the (?:system|hidden|stored))\b"
        r"|\b(?:root|admin|administrator|superuser|full|elevated|unrestricted) (?:access|rights|privileges|permissions"
        r"|control) (?:to|over|on) (?:you|this (?:assistant|ai|model|system)|the (?:assistant|ai|model|memory))\b"
        r"|\b(?:message|instructions?|notice|order|authori[sz]ation|update)(?: is| comes)? from (?:the |your )?"
        r"(?:system )?(?:developers?|admins?"
        r"|administrators?|system|operators?|anthropic|openai|security team|it department|creators?)\b"
        r"|\b(?:authori[sz]ed|approved|sanctioned) by (?:the |your )?(?:admins?|administrators?|system|developers?"
        r"|anthropic|openai|operators?)\b|\bthis is (?:your|the) (?:developer|creator|admin|administrator|operator"
        r"|system|owner)\b|\bon behalf of (?:the |your )?(?:system|admin|administrator|developers?|anthropic|openai)\b",
    ),
    _shape(
        "memory_command",
        r"\b(?:remember|store|record|save|memori[sz]e|note down|keep in mind|add to (?:your )?memory)\b[^.\n]{0,24}?"
        r"\b(?:the|this) user(?:'s)?\b",
    ),
    _shape(
        "encoded_instruction",
        r"\b(?:decode|base64[- ]decode|rot13|unscramble|decipher|translate|convert|reverse)\b[^.\n]{0,60}?\b(?:and|then)\b[^.\n]{0,12}?"
        r"\b(?:follow|execute|run|obey|do|apply|act on|carry out)\b",
    ),
]

MEMORY_ONLY = frozenset({"heading"})  # shapes of a memory's own text, not of the transcript lines it rests on

SEGMENT_START = [
    _shape(
        "role_marker",
        rf"(?:\[?\d+\]\s*)?(?:{ROLE}|tool|function|(?:tool|function) (?:output|result|response|call)s?"
        r"|(?:system|developer|admin|administrator|operator|security) (?:message|prompt|note|notice|instructions?"
        r"|override|update|command|alert|directive))(?:\s*\([^)]{0,30}\))?\s*[:>\uff1a]",
        at_start=True,
    ),
    _shape(  # "SYSTEM NOTICE — ...": a role's notice in capitals, before a dash (a segment's end)
        "role_marker",
        r"(?-i:(?:SYSTEM|DEVELOPER|ADMIN|ADMINISTRATOR|OPERATOR|SECURITY) (?:MESSAGE|PROMPT|NOTE|NOTICE|INSTRUCTIONS?"
        r"|OVERRIDE|UPDATE|COMMAND|ALERT|DIRECTIVE))\s*(?:-+\s|$)",
        at_start=True,
    ),
    _shape("heading", r"#{1,6}(?:\s|$)|={3,}\s*$", at_start=True),
    _shape(
        "role_heading",  # a heading that names a role or a rule set, steering in a transcript line too
        r"#{1,6}\s*(?:system|sys|instructions?|assistant|developer|admin|administrator|operator|override|prompt"
        r"|new (?:rules|instructions)|rules for)\b",
        at_start=True,
    ),
    _shape(
        "order",
        r"(?:please\s+|now\s+|important\s*:\s*|note\s*:\s*)*(?:ignore|disregard|forget|override|bypass)\s+"
        r"(?:all|any|previous|prior|above|earlier|your|everything|what|safety|the (?:above|previous|system|prior"
        r"|earlier|original|initial|instructions|rules|guidelines|context))\b",
        at_start=True,
    ),
]
