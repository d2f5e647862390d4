"""The scripted server's answer to the `compact` card: an extractive summary computed from the
history the request carries, with no knowledge of what any test or eval looks for.

It reads the numbered history as the card marks it and keeps, from what the user and the
assistant said and the arguments of their tool calls (never from tool output, which a model
would have to read and judge): the task as first stated, id-like words, file names, paths and
URLs, the user's sentences that set a constraint, sentences that name an error or a step still
to do, and the assistant's decisions.
A plain extractive stand-in for a model, so an eval without an endpoint still runs end to end.
"""

from __future__ import annotations

import json
import re
from typing import Any

from dreamer.llm.scripted.reply import Reply

CARD_TITLE = "# Compacting a long task"
_ENTRY = re.compile(r"^\[(\d+)\] (user|assistant|tool [^:]*?): ?(.*)$")
_CALL = re.compile(r"^    calls (\w+)\((.*)\) id \S+$")
_ID = re.compile(
    r"\b(?=[A-Za-z0-9_.\-/]*\d)(?=[A-Za-z0-9_.\-/]*[A-Za-z_])[A-Za-z][A-Za-z0-9]*(?:[_\-./][A-Za-z0-9]+)+\b"
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n")
_CONSTRAINT = re.compile(
    r"\b(never|always|must|do not|don't|dont|only|avoid|keep|without|no more than|has to|have to|should|make sure)\b",
    re.I,
)
_PENDING = re.compile(
    r"\b(next|todo|to do|still|then|after that|remaining|pending|later|need to|needs to|will)\b", re.I
)
_FILE = re.compile(
    r"https?://[^\s\"')]+|(?:[\w.\-]+/)+[\w.\-]+|\b[\w\-]+\.(?:py|tsx?|jsx?|json|ya?ml|md|csv|sql|toml|rst|txt|cfg|ini)\b"
)
_ERROR = re.compile(
    r"\b(error|errors|failed|fails|failure|exception|refused|denied|cannot|traceback)\b|\w+Error\b", re.I
)
_DECISION = re.compile(r"\b(decided|going with|chose|choose|use|using|switch|instead|picked|settled)\b", re.I)
MAX_ITEMS = 12


def is_compact_request(body: dict[str, Any]) -> bool:
    msgs = body.get("messages") or []
    return bool(msgs) and str(msgs[0].get("content", "")).startswith(CARD_TITLE)


def _said(body: dict[str, Any]) -> list[tuple[str, str]]:
    """(role, text) of each user and assistant entry and each tool call's arguments."""
    user = next((m.get("content", "") for m in body.get("messages", []) if m.get("role") == "user"), "")
    out: list[tuple[str, str]] = []
    role = ""  # the entry a line without a number of its own goes on
    for line in str(user).splitlines():
        entry, call = _ENTRY.match(line), _CALL.match(line)
        if entry:
            role = entry.group(2) if entry.group(2) in ("user", "assistant") else ""
            if role:
                out.append((role, entry.group(3)))
        elif call:
            out.append(("call", f"{call.group(1)} {call.group(2)}"))
            role = ""
        elif role and out and line.strip() not in ("<history>", "</history>"):
            out[-1] = (role, f"{out[-1][1]}\n{line}")
    return out


def _sentences(said: list[tuple[str, str]], roles: tuple[str, ...], pattern: re.Pattern[str]) -> list[str]:
    found: list[str] = []
    for role, text in said:
        if role in roles:
            found += [s.strip() for s in _SENTENCE.split(text) if pattern.search(s) and len(s.strip()) > 3]
    return list(dict.fromkeys(found))[-MAX_ITEMS:]


def compact_answer(body: dict[str, Any]) -> dict[str, Any]:
    """The summary answer for one `compact` request."""
    said = _said(body)
    words = [i for _, text in said for i in _ID.findall(text)]
    task = next((t for r, t in said if r == "user"), "")
    last = next((t for r, t in reversed(said) if r == "assistant" and t), "")
    summary = " ".join(p for p in (f"Task: {task}" if task else "", f"Last: {last}" if last else "") if p)
    calls = sum(1 for r, _ in said if r == "call")
    return {
        "summary": summary,
        "ids": list(dict.fromkeys(words))[-3 * MAX_ITEMS :],
        "files": list(dict.fromkeys(f.rstrip(".,;:") for _, text in said for f in _FILE.findall(text)))[-MAX_ITEMS:],
        "errors": _sentences(said, ("user", "assistant"), _ERROR),
        "pending_steps": _sentences(said, ("user", "assistant"), _PENDING),
        "decisions": _sentences(said, ("assistant",), _DECISION),
        "constraints": _sentences(said, ("user",), _CONSTRAINT),
        "dropped": f"the output of {calls} tool call(s) beyond what is said here" if calls else "",
    }


def compact_script(body: dict[str, Any]) -> Reply:
    """A `Script` answering the `compact` card (anything else: an empty object)."""
    if is_compact_request(body):
        return Reply(content=json.dumps(compact_answer(body)))
    return Reply(content="{}")
