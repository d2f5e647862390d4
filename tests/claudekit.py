"""Test helpers: Claude Code transcript lines, as Claude Code writes them, and hook inputs in the
shape its documentation gives."""

from __future__ import annotations

import json
from pathlib import Path

SESSION = "7c1f4e2a-9b3d-4a5e-8f60-1d2c3b4a5e6f"
CWD = "/home/dev/projects/travel-planner"


def turn(n: int, role: str, text: str, session: str = SESSION) -> dict:
    """Line `n` of a transcript: a user or assistant message."""
    return {
        "parentUuid": f"uuid-{n - 1}" if n > 1 else None,
        "isSidechain": False,
        "userType": "external",
        "cwd": CWD,
        "sessionId": session,
        "version": "1.0.51",
        "type": role,
        "message": {"role": role, "content": text if role == "user" else [{"type": "text", "text": text}]},
        "uuid": f"uuid-{n}",
        "timestamp": f"2026-11-30T09:00:{n:02d}.000Z",
    }


def append_turns(path: Path, *turns: tuple[str, str], start: int = 1, session: str = SESSION) -> int:
    """Append (role, text) lines to a transcript; the number of the next line."""
    with path.open("a", encoding="utf-8") as handle:
        for i, (role, text) in enumerate(turns):
            handle.write(json.dumps(turn(start + i, role, text, session)) + "\n")
    return start + len(turns)


def hook_input(event: str, transcript: Path, **extra) -> str:
    """A hook's stdin: the common fields and the event's own."""
    value = {
        "session_id": SESSION,
        "transcript_path": str(transcript),
        "cwd": CWD,
        "hook_event_name": event,
        **extra,
    }
    return json.dumps(value)
