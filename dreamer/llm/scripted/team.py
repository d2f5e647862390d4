"""How the scripted server answers the team card (`cards/team.md`) when no script is set: from
the request itself, honestly. Each new line of the round that states a decision, a lesson,
someone's expertise or a constraint becomes one item under that tag, citing that line, in the
line's own words; a line stating none of them (greetings, chatter) becomes nothing."""

from __future__ import annotations

import re
from typing import Any

from dreamer.llm.scripted.reply import Reply

TEAM_CARD_TITLE = "# Team round"  # how the team card's system prompt begins
_LINE = re.compile(r"^\[(\d+)\] ([^:\n]+?)( \(context\))?: (.*)$")
TAG_WORDS = (  # the first tag whose words a line says is its tag
    ("decision", re.compile(r"\b(?:chose|chosen|decided|picked|went with|instead of|over)\b", re.I)),
    ("lesson", re.compile(r"\b(?:fixed|worked|rework|failed|broke|lesson|timed out)\b", re.I)),
    ("expertise", re.compile(r"\b(?:knows|is good at|is best at|expert|owns)\b", re.I)),
    ("context", re.compile(r"\b(?:deadline|due|budget|client|must|ships?|by \d)\b", re.I)),
)
TAGS = tuple(tag for tag, _ in TAG_WORDS)


def is_team_request(body: dict[str, Any]) -> bool:
    """Whether a chat request carries the team card."""
    system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), None)
    return isinstance(system, str) and system.startswith(TEAM_CARD_TITLE)


def round_lines(body: dict[str, Any]) -> list[tuple[int, str, str]]:
    """(seq, speaker, text) of each new line of the round a team request carries."""
    user = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "user"), "")
    out = []
    for raw in str(user).splitlines():
        m = _LINE.match(raw)
        if m and not m.group(3):
            out.append((int(m.group(1)), m.group(2), m.group(4).strip()))
    return out


def tag_of(text: str) -> str | None:
    """The tag a line's words put it under, or None."""
    return next((tag for tag, words in TAG_WORDS if words.search(text)), None)


def team_answer(body: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """The answer to a team request: each tagged line an item under its tag."""
    answer: dict[str, list[dict[str, Any]]] = {tag: [] for tag in TAGS}
    for seq, _speaker, text in round_lines(body):
        if (tag := tag_of(text)) is not None and len(text) >= 3:
            answer[tag].append({"text": text, "seqs": [seq], "importance": 0.7, "tags": []})
    return answer


def team_reply(body: dict[str, Any]) -> Reply | None:
    """The reply to a team request, or None for any other request."""
    return Reply.json(team_answer(body)) if is_team_request(body) else None
