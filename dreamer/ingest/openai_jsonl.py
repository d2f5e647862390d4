"""OpenAI chat JSONL (format ``openai``).

Two line shapes, which may be mixed in one file:

* one message per line: ``{"role", "content", "name"?, "tool_calls"?, "tool_call_id"?,
  "created_at"|"timestamp"?}``; these lines form one session whose external id is the file stem;
* one conversation per line: ``{"messages": [...], "id"|"session_id"?, "title"?}``; each line is
  a session with that id, else ``"<stem>:<line>"``.

Content is a string, null (a tool-call-only assistant message) or a list of parts (text parts
are joined, images become ``[image]``). Role ``developer`` maps to ``system`` and ``function``
to ``tool``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from dreamer.ingest.base import (
    DEFAULT_MAX_MESSAGE_BYTES,
    LineRejected,
    ParsedMessage,
    ParsedSession,
    ParseResult,
    Rejection,
    check_message,
    clean_text,
    iter_json_lines,
    optional_text,
    parse_timestamp,
    session_start,
    short_title,
    to_json_text,
)

log = logging.getLogger(__name__)

FORMAT = "openai"
ROLE_ALIASES = {"developer": "system", "function": "tool"}
TEXT_PART_TYPES = ("text", "input_text", "output_text")


def parse(path: Path, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> ParseResult:
    """Sessions and rejections of one OpenAI JSONL file."""
    path = Path(path)
    where = str(path)
    result = ParseResult()
    loose = ParsedSession(external_id=path.stem, messages=[], source=FORMAT)
    loose_position: int | None = None
    for lineno, value in iter_json_lines(path, result.rejections):
        if isinstance(value, dict) and isinstance(value.get("messages"), list):
            result.sessions.append(_conversation(value, path, lineno, max_message_bytes, result.rejections))
            continue
        try:
            message = _line_message(value, lineno, max_message_bytes)
        except LineRejected as exc:
            result.rejections.append(Rejection(where, lineno, str(exc)))
            continue
        if loose_position is None:
            loose_position = len(result.sessions)
        loose.messages.append(message)
    if loose.messages:
        loose.created_at = session_start(loose.messages)
        result.sessions.insert(loose_position or 0, loose)
    result.sessions = [s for s in result.sessions if s.messages]
    return result


def _line_message(value: Any, lineno: int, max_message_bytes: int) -> ParsedMessage:
    if not isinstance(value, dict):
        raise LineRejected("expected a JSON object")
    if "role" not in value:
        raise LineRejected("neither a message (no 'role') nor a conversation (no 'messages' list)")
    message = to_message(value, lineno)
    check_message(message, max_message_bytes)
    return message


def _conversation(
    value: dict[str, Any], path: Path, lineno: int, max_message_bytes: int, rejections: list[Rejection]
) -> ParsedSession:
    where = str(path)
    try:
        external_id = optional_text(value.get("id") or value.get("session_id"), "id")
    except LineRejected as exc:
        rejections.append(Rejection(where, lineno, f"{exc}; using the line number instead"))
        external_id = None
    session = ParsedSession(
        external_id=external_id or f"{path.stem}:{lineno}",
        messages=[],
        title=short_title(value.get("title")),
        source=FORMAT,
    )
    for index, item in enumerate(value["messages"], start=1):
        try:
            if not isinstance(item, dict):
                raise LineRejected("expected a JSON object")
            message = to_message(item, lineno)
            check_message(message, max_message_bytes)
        except LineRejected as exc:
            rejections.append(Rejection(where, lineno, f"message {index}: {exc}"))
            continue
        session.messages.append(message)
    session.created_at = parse_timestamp(value.get("created_at")) or session_start(session.messages)
    return session


def to_message(item: dict[str, Any], lineno: int | None = None) -> ParsedMessage:
    """One OpenAI chat message as a `ParsedMessage` (role not yet checked)."""
    role = item.get("role")
    if not isinstance(role, str):
        raise LineRejected("missing or non-string 'role'")
    role = ROLE_ALIASES.get(role, role)
    return ParsedMessage(
        role=role,
        content=content_text(item.get("content")),
        name=optional_text(item.get("name"), "name"),
        tool_call_id=optional_text(item.get("tool_call_id"), "tool_call_id"),
        tool_calls=_tool_calls(item),
        created_at=parse_timestamp(item.get("created_at", item.get("timestamp"))),
        line=lineno,
    )


def content_text(content: Any) -> str:
    """A string, null or list-of-parts content as plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return clean_text(content)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        raise LineRejected("'content' must be a string, null or a list of parts")
    pieces = [_part_text(part) for part in content]
    return clean_text("\n".join(p for p in pieces if p))


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if not isinstance(part, dict):
        raise LineRejected("content part must be an object or a string")
    kind = part.get("type")
    if kind in TEXT_PART_TYPES or (kind is None and "text" in part):
        text = part.get("text")
        if isinstance(text, dict):  # older SDKs nest {"value": ...}
            text = text.get("value")
        return text if isinstance(text, str) else ""
    if kind == "refusal":
        return str(part.get("refusal") or "")
    if kind in ("image_url", "input_image", "image"):
        return "[image]"
    if kind in ("input_audio", "audio"):
        return "[audio]"
    if kind in ("file", "input_file"):
        return "[file]"
    return f"[{kind}]" if isinstance(kind, str) else ""


def _tool_calls(item: dict[str, Any]) -> list[dict[str, Any]] | None:
    raw = item.get("tool_calls")
    if raw is None and isinstance(item.get("function_call"), dict):
        raw = [{"id": None, "function": item["function_call"]}]
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise LineRejected("'tool_calls' must be a list")
    calls = [_tool_call(call) for call in raw]
    return calls or None


def _tool_call(call: Any) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise LineRejected("tool call must be an object")
    inner = call.get("function")
    function: dict[str, Any] = inner if isinstance(inner, dict) else call
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise LineRejected("tool call without a function name")
    return {
        "id": optional_text(call.get("id"), "tool call id"),
        "name": clean_text(name),
        "arguments": to_json_text(function.get("arguments", "")),
    }
