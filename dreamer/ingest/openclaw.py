"""OpenClaw session transcripts (format ``openclaw``): one JSONL file per session.

Supported shape:

* an optional header line ``{"type": "session", "id", "timestamp", "cwd"?}``; its ``id`` is the
  session's external id (else the file stem) and ``cwd``'s basename its project;
* message lines ``{"type": "message", "timestamp", "message": {"role", "content",
  "toolCallId"?, "toolName"?, "isError"?, "timestamp"?}}`` with role ``user``, ``assistant`` or
  ``toolResult`` (stored as ``tool``); ``content`` is a string or a list of blocks:
  ``{"type": "text", "text"}``, ``{"type": "toolCall", "id", "name", "arguments"}`` (kept as a
  tool call), ``{"type": "image", ...}`` (``[image]``) and ``{"type": "thinking", ...}`` (dropped);
* every other line type (``model_change``, ``thinking_level_change``, ``custom``, ...) is skipped.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
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
    project_name,
    session_start,
    to_json_text,
)

log = logging.getLogger(__name__)

FORMAT = "openclaw"
ROLE_MAP = {"user": "user", "assistant": "assistant", "toolResult": "tool", "system": "system"}


@dataclass
class _Header:
    session_id: str | None = None
    created_at: datetime | None = None
    cwd: str | None = None


def parse(path: Path, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> ParseResult:
    """The one session of an OpenClaw transcript file."""
    path = Path(path)
    where = str(path)
    result = ParseResult()
    header = _Header()
    messages: list[ParsedMessage] = []
    for lineno, value in iter_json_lines(path, result.rejections):
        try:
            message = _line(value, lineno, header)
            if message is None:
                continue
            check_message(message, max_message_bytes)
        except LineRejected as exc:
            result.rejections.append(Rejection(where, lineno, str(exc)))
            continue
        messages.append(message)
    if messages:
        result.sessions.append(
            ParsedSession(
                external_id=header.session_id or path.stem,
                messages=messages,
                project=project_name(header.cwd),
                created_at=header.created_at or session_start(messages),
                source=FORMAT,
            )
        )
    return result


def _line(value: Any, lineno: int, header: _Header) -> ParsedMessage | None:
    if not isinstance(value, dict):
        raise LineRejected("expected a JSON object")
    kind = value.get("type")
    if kind == "session":
        _read_header(value, header)
        return None
    if kind != "message":
        return None
    message = value.get("message")
    if not isinstance(message, dict):
        raise LineRejected("message line without a 'message' object")
    return _message(message, value.get("timestamp"), lineno)


def _read_header(value: dict[str, Any], header: _Header) -> None:
    if header.session_id is None:
        header.session_id = optional_text(value.get("id"), "session id")
    if header.created_at is None:
        header.created_at = parse_timestamp(value.get("timestamp"))
    if header.cwd is None and isinstance(value.get("cwd"), str):
        header.cwd = value["cwd"]


def _message(message: dict[str, Any], line_time: Any, lineno: int) -> ParsedMessage | None:
    raw_role = message.get("role")
    role = ROLE_MAP.get(raw_role) if isinstance(raw_role, str) else None
    if role is None:
        raise LineRejected(f"unknown role {raw_role!r}")
    texts, calls = _content(message.get("content"))
    text = clean_text("\n".join(t for t in texts if t))
    if role == "assistant" and not text and not calls:
        return None
    meta = {"is_error": True} if role == "tool" and message.get("isError") is True else None
    return ParsedMessage(
        role=role,
        content=text,
        name=optional_text(message.get("toolName"), "toolName") if role == "tool" else None,
        tool_call_id=optional_text(message.get("toolCallId"), "toolCallId") if role == "tool" else None,
        tool_calls=calls or None,
        created_at=parse_timestamp(line_time) or parse_timestamp(message.get("timestamp")),
        meta=meta,
        line=lineno,
    )


def _content(content: Any) -> tuple[list[str], list[dict[str, Any]]]:
    if content is None:
        return [], []
    if isinstance(content, str):
        return [content], []
    if not isinstance(content, list):
        raise LineRejected("'content' must be a string or a list of blocks")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        if not isinstance(block, dict):
            raise LineRejected("content block must be an object")
        kind = block.get("type")
        if kind == "text":
            texts.append(block["text"] if isinstance(block.get("text"), str) else "")
        elif kind == "toolCall":
            calls.append(_tool_call(block))
        elif kind == "image":
            texts.append("[image]")
        elif kind != "thinking" and isinstance(kind, str):
            texts.append(f"[{kind}]")
    return texts, calls


def _tool_call(block: dict[str, Any]) -> dict[str, Any]:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise LineRejected("toolCall block without a name")
    return {
        "id": optional_text(block.get("id"), "toolCall id"),
        "name": clean_text(name),
        "arguments": to_json_text(block.get("arguments", {})),
    }
