"""Session importers (OpenAI JSONL, Claude Code, OpenClaw, LoCoMo) and the recording API."""

from dreamer.ingest.base import ParsedMessage, ParsedSession, ParseResult, Rejection
from dreamer.ingest.detect import FORMATS, PARSERS, detect_format, parse_path
from dreamer.ingest.files import FileReport, ingest_file
from dreamer.ingest.store import RecordResult, record_messages

__all__ = [
    "FORMATS",
    "PARSERS",
    "FileReport",
    "ParseResult",
    "ParsedMessage",
    "ParsedSession",
    "RecordResult",
    "Rejection",
    "detect_format",
    "ingest_file",
    "parse_path",
    "record_messages",
]
