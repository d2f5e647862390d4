"""Claude Code session transcripts (format ``claude-code``): one JSONL file per session.

Lines carry ``type``, ``sessionId``, ``cwd``, ``timestamp``, ``uuid`` and, for ``user`` and
``assistant`` lines, ``message: {role, content}``. Other line types (``summary``, ``system``,
...) are skipped; the first ``summary`` becomes the session title. Content blocks: ``text`` is
kept, ``thinking`` is dropped, ``tool_use`` becomes a tool call plus a short text rendering, and
each ``tool_result`` becomes its own ``tool`` message. The project is the basename of ``cwd``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamer.core.secrets.redact import safe_cut
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
    json_text,
    optional_text,
    parse_timestamp,
    project_name,
    session_start,
    short_title,
    to_json_text,
)

log = logging.getLogger(__name__)

FORMAT = "claude-code"
MESSAGE_TYPES = ("user", "assistant")
TOOL_INPUT_CHARS = 2000
DROPPED_BLOCKS = ("thinking", "redacted_thinking")


@dataclass
class _State:
    """What one file's lines share: ids, cwd, title and tool names by call id."""

    session_id: str | None = None
    cwd: str | None = None
    title: str | None = None
    tool_names: dict[str, str] = field(default_factory=dict)


def parse(path: Path, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> ParseResult:
    """The one session of a Claude Code transcript file."""
    path = Path(path)
    where = str(path)
    result = ParseResult()
    state = _State()
    messages: list[ParsedMessage] = []
    for lineno, value in iter_json_lines(path, result.rejections):
        try:
            produced = _line(value, lineno, state)
            for message in produced:
                check_message(message, max_message_bytes)
        except LineRejected as exc:
            result.rejections.append(Rejection(where, lineno, str(exc)))
            continue
        messages.extend(produced)
    if messages:
        result.sessions.append(
            ParsedSession(
                external_id=state.session_id or path.stem,
                messages=messages,
                project=project_name(state.cwd),
                title=state.title,
                created_at=session_start(messages),
                source=FORMAT,
            )
        )
    return result


def _line(value: Any, lineno: int, state: _State) -> list[ParsedMessage]:
    if not isinstance(value, dict):
        raise LineRejected("expected a JSON object")
    _remember(value, state)
    kind = value.get("type")
    if kind not in MESSAGE_TYPES:
        return []
    message = value.get("message")
    if not isinstance(message, dict):
        raise LineRejected(f"{kind} line without a 'message' object")
    role = message.get("role", kind)
    if role not in MESSAGE_TYPES:
        raise LineRejected(f"unknown role {role!r}")
    when = parse_timestamp(value.get("timestamp"))
    meta = {"uuid": value["uuid"]} if isinstance(value.get("uuid"), str) else None
    if role == "assistant":
        return _assistant(message.get("content"), when, meta, lineno, state)
    return _user(message.get("content"), when, meta, lineno, state)


def _remember(value: dict[str, Any], state: _State) -> None:
    if state.session_id is None and isinstance(value.get("sessionId"), str) and value["sessionId"]:
        state.session_id = optional_text(value["sessionId"], "sessionId")
    if state.cwd is None and isinstance(value.get("cwd"), str):
        state.cwd = value["cwd"]
    if state.title is None and value.get("type") == "summary" and isinstance(value.get("summary"), str):
        state.title = short_title(value["summary"])


def _blocks(content: Any) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise LineRejected("'content' must be a string or a list of blocks")
    if not all(isinstance(block, dict) for block in content):
        raise LineRejected("content block must be an object")
    return content


def _assistant(
    content: Any, when: datetime | None, meta: dict[str, Any] | None, lineno: int, state: _State
) -> list[ParsedMessage]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in _blocks(content):
        kind = block.get("type")
        if kind in DROPPED_BLOCKS:
            continue
        if kind == "tool_use":
            call = _tool_call(block, state)
            calls.append(call)
            texts.append(_render_tool_use(call["name"], block.get("input")))
        else:
            texts.append(_block_text(block))
    text = clean_text("\n".join(t for t in texts if t))
    if not text and not calls:
        return []
    return [
        ParsedMessage(role="assistant", content=text, tool_calls=calls or None, created_at=when, meta=meta, line=lineno)
    ]


def _user(
    content: Any, when: datetime | None, meta: dict[str, Any] | None, lineno: int, state: _State
) -> list[ParsedMessage]:
    out: list[ParsedMessage] = []
    texts: list[str] = []

    def flush_text() -> None:
        text = clean_text("\n".join(t for t in texts if t))
        texts.clear()
        if text:
            out.append(ParsedMessage(role="user", content=text, created_at=when, meta=meta, line=lineno))

    for block in _blocks(content):
        if block.get("type") == "tool_result":
            flush_text()
            out.append(_tool_result(block, when, meta, lineno, state))
        elif block.get("type") not in DROPPED_BLOCKS:
            texts.append(_block_text(block))
    flush_text()
    return out


def _tool_call(block: dict[str, Any], state: _State) -> dict[str, Any]:
    name = block.get("name")
    if not isinstance(name, str) or not name:
        raise LineRejected("tool_use block without a name")
    call_id = optional_text(block.get("id"), "tool_use id")
    if call_id:
        state.tool_names[call_id] = name
    return {"id": call_id, "name": clean_text(name), "arguments": to_json_text(block.get("input", {}))}


def _render_tool_use(name: str, tool_input: Any) -> str:
    rendered = json_text(tool_input)
    if len(rendered) > TOOL_INPUT_CHARS:
        rendered = safe_cut(rendered, TOOL_INPUT_CHARS) + "..."
    return f"[tool_use {name}: {rendered}]"


def _tool_result(
    block: dict[str, Any], when: datetime | None, meta: dict[str, Any] | None, lineno: int, state: _State
) -> ParsedMessage:
    call_id = optional_text(block.get("tool_use_id"), "tool_use_id")
    content = block.get("content")
    if isinstance(content, list):
        text = "\n".join(t for t in (_block_text(b) for b in _blocks(content)) if t)
    elif content is None:
        text = ""
    else:
        text = content if isinstance(content, str) else json_text(content)
    return ParsedMessage(
        role="tool",
        content=clean_text(text),
        name=state.tool_names.get(call_id or ""),
        tool_call_id=call_id,
        created_at=when,
        meta={**(meta or {}), "is_error": True} if block.get("is_error") is True else meta,
        line=lineno,
    )


def _block_text(block: dict[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return text if isinstance(text, str) else ""
    if kind == "image":
        return "[image]"
    if kind == "document":
        return "[document]"
    return f"[{kind}]" if isinstance(kind, str) else ""
