"""LoCoMo conversations (format ``locomo``): one JSON document, a list of conversations.

Each conversation has ``sample_id`` and ``conversation`` with ``speaker_a``, ``speaker_b``,
``session_N`` (lists of turns ``{speaker, dia_id, text, img_url?, blip_caption?}``) and
``session_N_date_time`` ("1:56 pm on 8 May, 2023"). Every ``session_N`` becomes a session
``"<sample_id>:session_<N>"`` owned by user ``sample_id``; speaker_a speaks as ``user`` and
speaker_b as ``assistant``. Turn i of a session is stamped with the session time plus i seconds.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from dreamer.core.errors import json_reason
from dreamer.ingest.base import (
    DEFAULT_MAX_MESSAGE_BYTES,
    TOO_DEEP,
    LineRejected,
    ParsedMessage,
    ParsedSession,
    ParseResult,
    Rejection,
    check_message,
    clean_text,
    optional_text,
    parse_timestamp,
    read_bytes,
)

log = logging.getLogger(__name__)

FORMAT = "locomo"
SESSION_KEY = re.compile(r"session_(\d+)")
DATE_TIME = re.compile(
    r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})\s*", re.IGNORECASE
)
MONTHS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}


def parse(path: Path, *, max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> ParseResult:
    """One session per ``session_N`` of every conversation in the file."""
    path = Path(path)
    where = str(path)
    result = ParseResult()
    try:
        document = load_document(read_bytes(path))
    except LineRejected as exc:
        result.rejections.append(Rejection(where, None, str(exc)))
        return result
    ctx = _Context(where, max_message_bytes, result.rejections)
    for index, conversation in enumerate(document, start=1):
        try:
            sessions = _conversation(conversation, index, ctx)
        except LineRejected as exc:
            ctx.reject(f"conversation {index}: {exc}")
            continue
        result.sessions.extend(sessions)
    return result


def load_document(data: bytes) -> list[Any]:
    """The list of conversations; a single conversation object is accepted too."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LineRejected(f"not valid UTF-8 (byte offset {exc.start})") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LineRejected("invalid JSON: " + json_reason(exc, f"line {exc.lineno} column {exc.colno}")) from exc
    except RecursionError:
        raise LineRejected(TOO_DEEP) from None
    if isinstance(document, dict):
        document = [document]
    if not isinstance(document, list):
        raise LineRejected("expected a JSON list of conversations")
    return document


def parse_date_time(value: Any) -> datetime | None:
    """LoCoMo's "1:56 pm on 8 May, 2023" (or ISO text) as aware UTC; None when unreadable."""
    if not isinstance(value, str):
        return None
    match = DATE_TIME.fullmatch(value)
    if match is None:
        return parse_timestamp(value)
    hour, minute, half, day, month_name, year = match.groups()
    month = MONTHS.get(month_name[:3].lower())
    hour_24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
    if month is None:
        return None
    try:
        return datetime(int(year), month, int(day), hour_24, int(minute), tzinfo=UTC)
    except ValueError:
        return None


def session_numbers(conversation: dict[str, Any]) -> list[int]:
    """The N of every ``session_N`` key, in numeric order."""
    numbers = (SESSION_KEY.fullmatch(key) for key in conversation)
    return sorted(int(m.group(1)) for m in numbers if m)


@dataclass
class _Context:
    """Where rejections go while one file is read."""

    where: str
    max_message_bytes: int
    rejections: list[Rejection]

    def reject(self, reason: str) -> None:
        self.rejections.append(Rejection(self.where, None, reason))


def _conversation(item: Any, index: int, ctx: _Context) -> list[ParsedSession]:
    if not isinstance(item, dict) or not isinstance(item.get("conversation"), dict):
        raise LineRejected("expected an object with a 'conversation' object")
    sample_id = optional_text(item.get("sample_id"), "sample_id")
    if sample_id is None:
        raise LineRejected("missing 'sample_id'")
    body = item["conversation"]
    speaker_a, speaker_b = body.get("speaker_a"), body.get("speaker_b")
    if not (isinstance(speaker_a, str) and isinstance(speaker_b, str) and speaker_a and speaker_a != speaker_b):
        raise LineRejected(f"{sample_id}: 'speaker_a' and 'speaker_b' must be two distinct names")
    speakers = {speaker_a: "user", speaker_b: "assistant"}
    sessions = []
    for number in session_numbers(body):
        label = f"conversation {index} ({sample_id}) session_{number}"
        turns = body[f"session_{number}"]
        if not isinstance(turns, list):
            ctx.reject(f"{label}: expected a list of turns")
            continue
        started = parse_date_time(body.get(f"session_{number}_date_time"))
        if started is None:
            log.warning("%s: %s has no readable date time", ctx.where, label)
        session = ParsedSession(
            external_id=f"{sample_id}:session_{number}",
            messages=_turns(turns, speakers, started, label, ctx),
            user_id=sample_id,
            title=f"session {number}",
            created_at=started,
            source=FORMAT,
        )
        if session.messages:
            sessions.append(session)
    return sessions


def _turns(
    turns: list[Any], speakers: dict[str, str], started: datetime | None, label: str, ctx: _Context
) -> list[ParsedMessage]:
    messages = []
    for position, turn in enumerate(turns):
        try:
            message = _turn(turn, speakers)
            if started is not None:
                message.created_at = _turn_time(started, position)
            check_message(message, ctx.max_message_bytes)
        except LineRejected as exc:
            ctx.reject(f"{label} turn {position + 1}: {exc}")
            continue
        messages.append(message)
    return messages


def _turn_time(started: datetime, position: int) -> datetime:
    """The session time plus `position` seconds (at the end of the calendar, the session time)."""
    try:
        return started + timedelta(seconds=position)
    except OverflowError:
        return started


def _turn(turn: Any, speakers: dict[str, str]) -> ParsedMessage:
    if not isinstance(turn, dict):
        raise LineRejected("expected a turn object")
    speaker, text = turn.get("speaker"), turn.get("text")
    if not isinstance(speaker, str) or speaker not in speakers:
        raise LineRejected(f"unknown speaker {speaker!r}")
    if not isinstance(text, str):
        raise LineRejected("turn without a 'text' string")
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        text = f"{text} [image: {caption.strip()}]"
    dia_id = optional_text(turn.get("dia_id"), "dia_id")
    return ParsedMessage(
        role=speakers[speaker],
        content=clean_text(text),
        name=optional_text(speaker, "speaker"),
        meta={"dia_id": dia_id} if dia_id else None,
    )
