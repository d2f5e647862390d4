"""Structured-output modes and how an endpoint's refusal of one is read.

Endpoints differ in the `response_format` they take: OpenAI, Ollama, vLLM and LM Studio take
`json_schema`; llama.cpp's server takes `json_schema` and a `schema` inside `json_object`;
llama-cpp-python takes only `json_object` (with an optional `schema`) and answers 500 to the rest;
some gateways take none. The client tries the modes in `OUTPUT_MODES` order and keeps the first that an
endpoint accepts. A refusal of the format, in any status (400, 422, 500) whose error names
`response_format`, `json_schema` or the format's type, is an answer about capability: the client
switches at once, never retries it and never counts it toward the breaker.
"""

from __future__ import annotations

import json
from typing import Any, Literal, cast, get_args

import openai
from openai.types.chat.completion_create_params import ResponseFormat
from pydantic import BaseModel

OutputMode = Literal["json_schema", "json_object_schema", "json_object", "prompt"]
OUTPUT_MODES: tuple[OutputMode, ...] = get_args(OutputMode)
AUTO = "auto"
FORMAT_STATUSES = frozenset({400, 422, 500})
FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format")

SCHEMA_PROMPT = "Reply with a single JSON object that matches this JSON schema:\n{schema}"

_METADATA = ("title", "description", "default")


def is_mode(value: str) -> bool:
    return value in OUTPUT_MODES


def as_mode(value: str | None) -> OutputMode | None:
    """`value` as an output mode; None for anything else (auto, empty, unknown)."""
    for output_mode in OUTPUT_MODES:
        if value == output_mode:
            return output_mode
    return None


def next_mode(output_mode: OutputMode) -> OutputMode | None:
    """The output mode tried after `output_mode` is refused; None after the last."""
    i = OUTPUT_MODES.index(output_mode)
    return OUTPUT_MODES[i + 1] if i + 1 < len(OUTPUT_MODES) else None


def wire_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent with a request: the model's, without titles, descriptions and
    defaults. The prompt card describes every field (`dreamer.llm.cards`), `required` says which
    may be left out, and an endpoint bills each token of the schema on every call."""
    stripped: dict[str, Any] = _strip(schema.model_json_schema())
    return stripped


def _strip(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip(v) for v in node]
    if not isinstance(node, dict):
        return node
    return {
        key: ({name: _strip(v) for name, v in value.items()} if key in ("properties", "$defs") else _strip(value))
        for key, value in node.items()
        if key not in _METADATA
    }


def schema_format(schema: type[BaseModel], name: str) -> ResponseFormat:
    """The `response_format` asking for a JSON object of `schema` (see `wire_schema`)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": wire_schema(schema), "strict": False}}


def response_format(output_mode: OutputMode, schema: type[BaseModel], name: str) -> ResponseFormat | None:
    """What a request of `output_mode` sends as `response_format` (None: the member is left out)."""
    if output_mode == "json_schema":
        return schema_format(schema, name)
    if output_mode == "json_object_schema":
        # llama.cpp and llama-cpp-python read `schema` as a grammar; the typed dict has no such key
        return cast(ResponseFormat, {"type": "json_object", "schema": wire_schema(schema)})
    if output_mode == "json_object":
        return {"type": "json_object"}
    return None


def system_prompt(output_mode: OutputMode, system: str, schema: type[BaseModel]) -> str:
    """The system message of `output_mode`: the card, and the wire schema after it unless the endpoint
    is given the schema as `json_schema` (where it reads it from the request)."""
    if output_mode == "json_schema":
        return system
    wire = json.dumps(wire_schema(schema), separators=(",", ":"))
    return f"{system}\n\n{SCHEMA_PROMPT.format(schema=wire)}"


def error_text(exc: openai.APIStatusError) -> str:
    """Everything an error answer says: its message, its param and its whole body."""
    parts = [exc.message, str(getattr(exc, "param", "") or "")]
    body = exc.body
    parts.append(body if isinstance(body, str) else json.dumps(body, default=str))
    return " ".join(parts)


def rejects_format(exc: BaseException) -> bool:
    """Whether an error answer refuses the request's structured-output format (400, 422 or 500
    naming `response_format`, `json_schema` or the format's type): a capability, not a fault."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in FORMAT_STATUSES:
        return False
    if getattr(exc, "param", None) == "response_format":
        return True
    text = error_text(exc).lower()
    return any(word in text for word in FORMAT_WORDS)
