"""How the scripted server answers the screen card (`cards/screen.md`): by its own rule, never
from the queue or a test's script, so a pass's screen call leaves the replies a test lined up for
extraction and judgement to them."""

from __future__ import annotations

from typing import Any

from dreamer.llm.scripted.reply import Reply

SCREEN_CARD_TITLE = "# Screen:"  # how the screen card's system prompt begins


def is_screen_request(body: dict[str, Any]) -> bool:
    """Whether a chat request carries the screen card."""
    system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), None)
    return isinstance(system, str) and system.startswith(SCREEN_CARD_TITLE)


def screen_reply(body: dict[str, Any]) -> Reply:
    """The scripted screen's own answer: it files no line (a stand-in that reads no meaning; a
    test sets its own with `ScriptedServer.set_screen`, the real-model lane asks a model)."""
    return Reply.json({"secret": [], "steers": []})
