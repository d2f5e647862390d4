"""Which importer reads a file, and the one entry point that parses a file by format name."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dreamer.core.errors import IngestError
from dreamer.ingest import claude_code, locomo, openai_jsonl, openclaw
from dreamer.ingest.base import DEFAULT_MAX_MESSAGE_BYTES, ParseResult, check_readable, iter_raw_lines

log = logging.getLogger(__name__)

Parser = Callable[..., ParseResult]

PARSERS: dict[str, Parser] = {
    openai_jsonl.FORMAT: openai_jsonl.parse,
    claude_code.FORMAT: claude_code.parse,
    openclaw.FORMAT: openclaw.parse,
    locomo.FORMAT: locomo.parse,
}
FORMATS = tuple(PARSERS)
SNIFF_LINES = 50
SNIFF_BYTES = 16 * 1024 * 1024


def detect_format(path: Path) -> str:
    """The format name of a transcript file, judged from its first lines; ``openai`` by default."""
    path = Path(path)
    if path.suffix.lower() == ".json":
        return locomo.FORMAT
    seen_lines = 0
    seen_bytes = 0
    for _, raw in iter_raw_lines(path):
        seen_bytes += len(raw)
        stripped = raw.strip().lstrip(b"\xef\xbb\xbf")
        if not stripped:
            continue
        if seen_lines == 0 and stripped.startswith(b"["):
            return locomo.FORMAT
        verdict = _judge_line(stripped)
        if verdict:
            return verdict
        seen_lines += 1
        if seen_lines >= SNIFF_LINES or seen_bytes >= SNIFF_BYTES:
            break
    return openai_jsonl.FORMAT


def _judge_line(raw: bytes) -> str | None:
    try:
        value: Any = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    kind = value.get("type")
    if kind == "session" or (kind == "message" and isinstance(value.get("message"), dict)):
        return openclaw.FORMAT
    if "sessionId" in value and isinstance(kind, str):
        return claude_code.FORMAT
    if "role" in value or isinstance(value.get("messages"), list):
        return openai_jsonl.FORMAT
    if isinstance(value.get("conversation"), dict):
        return locomo.FORMAT
    return None


def resolve_format(path: Path, fmt: str = "auto") -> str:
    """`fmt` itself when it names a format, the detected one for ``auto``; `IngestError` for an
    unknown format or a path that is not a readable regular file (`check_readable`)."""
    if fmt != "auto" and fmt not in PARSERS:
        raise IngestError(f"unknown format {fmt!r}: use auto or one of {', '.join(FORMATS)}")
    check_readable(path)
    return detect_format(path) if fmt == "auto" else fmt


def parse_path(path: Path, fmt: str = "auto", max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES) -> ParseResult:
    """Parse one file with the named (or detected) importer."""
    name = resolve_format(Path(path), fmt)
    log.debug("parsing %s as %s", path, name)
    return PARSERS[name](Path(path), max_message_bytes=max_message_bytes)
