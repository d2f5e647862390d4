"""The behaviours of other servers the scripted server can take on: what they answer to a
`response_format` they do not take, replies fenced or wrapped in prose, where they tell their
context window, and how they refuse a request over it or cut a reply at `max_tokens`.

Each is written as the server documents or answers it: llama-cpp-python 0.3.36 (500 on
`json_schema`, an OpenAI-style overflow error), vLLM (422 validation errors), llama.cpp's server
(`GET /props`), Ollama (`POST /api/show`), gateways that ignore `response_format`."""

from __future__ import annotations

from typing import Any

from dreamer.core.tokens import count_tokens
from dreamer.llm.bill import prompt_tokens_of

JSONObject = dict[str, Any]
FORMATS = ("openai", "no-json-schema", "llama-cpp-python", "422", "ignore")
WRAPS = ("fence", "prose")
WINDOW_SOURCES = ("models", "props", "ollama")

SCHEMA_UNSUPPORTED = "response_format json_schema is not supported"
LLAMA_CPP_PYTHON_SCHEMA_ERROR = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}"
)


def format_refusal(formats: str, body: JSONObject) -> tuple[int, JSONObject] | None:
    """The error a server of kind `formats` answers to the request's `response_format`, or None
    when it takes it."""
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    if kind != "json_schema" or formats in ("openai", "ignore"):
        return None
    if formats == "llama-cpp-python":
        return 500, _error(LLAMA_CPP_PYTHON_SCHEMA_ERROR, "internal_server_error")
    if formats == "422":
        loc = ["body", "response_format", "type"]
        return 422, {"detail": [{"type": "literal_error", "loc": loc, "msg": "Input should be 'json_object'"}]}
    return 400, _error(SCHEMA_UNSUPPORTED, "invalid_request_error", "response_format")


def wrapped(wrap: str | None, content: str | None) -> str | None:
    """The reply as a server or model of that habit writes it around the JSON."""
    if content is None or wrap is None:
        return content
    if wrap == "fence":
        return f"```json\n{content}\n```"
    return f"Sure! Here is the JSON:\n{content}\nLet me know if you need anything else."


def model_extras(window: int | None, source: str | None) -> JSONObject:
    """What a `/v1/models` entry says of the window when the server tells it there."""
    return {"context_length": window, "max_model_len": window} if window and source == "models" else {}


def props_body(window: int | None, source: str | None) -> JSONObject | None:
    """llama.cpp's `GET /props`, or None where the server has no such route."""
    if not window or source != "props":
        return None
    return {"default_generation_settings": {"n_ctx": window, "params": {}}, "total_slots": 1}


def show_body(window: int | None, source: str | None) -> JSONObject | None:
    """Ollama's `POST /api/show`, or None where the server has no such route."""
    if not window or source != "ollama":
        return None
    info = {"general.architecture": "llama", "llama.context_length": 131_072}  # trained; not what is served
    return {"model_info": info, "parameters": f"num_ctx                        {window}"}


def overflow(window: int | None, body: JSONObject) -> tuple[int, JSONObject] | None:
    """The 400 a server answers to a request whose prompt and reply budget exceed its window."""
    if not window:
        return None
    prompt = prompt_tokens_of(body)
    asked = body.get("max_tokens")
    reply = asked if isinstance(asked, int) else 0
    if prompt + reply <= window:
        return None
    message = (
        f"This model's maximum context length is {window} tokens. However, you requested {prompt + reply} tokens "
        f"({prompt} in the messages, {reply} in the completion). Please reduce the length of the messages or "
        "completion."
    )
    return 400, {
        "error": {**_error(message, "invalid_request_error", "messages")["error"], "code": "context_length_exceeded"}
    }


def cut_reply(content: str | None, max_tokens: Any) -> tuple[str | None, bool]:
    """The reply cut to `max_tokens` tokens, and whether it was cut (finish_reason `length`)."""
    if content is None or not isinstance(max_tokens, int) or count_tokens(content) <= max_tokens:
        return content, False
    low, high = 0, len(content)
    while low < high:  # the longest prefix within the budget
        mid = (low + high + 1) // 2
        low, high = (mid, high) if count_tokens(content[:mid]) <= max_tokens else (low, mid - 1)
    return content[:low], True


def _error(message: str, kind: str, param: str | None = None) -> JSONObject:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}
