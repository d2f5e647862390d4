"""What an endpoint bills for a chat request, counted the way OpenAI's chat models count it.

Each message costs its role's and content's tokens plus 3 (and 1 more, with its tokens, for a
name); the reply is primed with 3 more; a `response_format` JSON schema and tools are counted as
their compact JSON text (an endpoint turns them into prompt text the model reads on every call).
The scripted server reports this as `usage.prompt_tokens`; the pass guard checks a call against
its budget with it before making it. Run records keep the endpoint's own figures, never these.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from dreamer.core.tokens import count_tokens
from dreamer.llm.formats import schema_format

TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
REPLY_PRIMING = 3

JSONObject = dict[str, Any]


def message_text(content: Any) -> str:
    """The text of a chat message's content (a string or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def prompt_tokens_of(body: JSONObject) -> int:
    """The prompt tokens of a chat request body, by the rule above."""
    total = REPLY_PRIMING
    for m in body.get("messages") or []:
        if not isinstance(m, dict):
            continue
        total += (
            TOKENS_PER_MESSAGE + count_tokens(str(m.get("role") or "")) + count_tokens(message_text(m.get("content")))
        )
        if m.get("name"):
            total += TOKENS_PER_NAME + count_tokens(str(m["name"]))
    return total + schema_tokens(body)


def schema_tokens(body: JSONObject) -> int:
    """The tokens of a request's output schema: its `response_format` json_schema member and its
    tools, each as compact JSON text."""
    fmt = body.get("response_format")
    total = 0
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        total += count_tokens(compact_json(fmt.get("json_schema")))
    if body.get("tools"):
        total += count_tokens(compact_json(body["tools"]))
    return total


def compact_json(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def request_body(system: str, user: str, schema: type[BaseModel], name: str) -> JSONObject:
    """The parts of the body `OpenAILLM` sends for one structured call that an endpoint bills."""
    return {
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
        "response_format": schema_format(schema, name),
    }


def billed_prompt(system: str, user: str, schema: type[BaseModel], name: str) -> int:
    """The prompt tokens one structured call is billed, as `OpenAILLM` sends it with a JSON schema."""
    return prompt_tokens_of(request_body(system, user, schema, name))
