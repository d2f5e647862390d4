"""The JSON bodies the scripted server answers with: chat completions, embeddings with
deterministic hashed bag-of-words vectors, the model list and OpenAI-style errors."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct
from typing import TYPE_CHECKING, Any

from dreamer.core.tokens import count_tokens
from dreamer.llm.bill import prompt_tokens_of

if TYPE_CHECKING:
    from dreamer.llm.scripted.reply import Reply

MODEL_ID = "scripted"
CREATED = 1_700_000_000
JSONObject = dict[str, Any]
_WORD = re.compile(r"\w+")


def model_entry() -> JSONObject:
    return {"id": MODEL_ID, "object": "model", "created": CREATED, "owned_by": "dreamer"}


def error_body(message: str, kind: str, param: str | None = None) -> JSONObject:
    return {"error": {"message": message, "type": kind, "param": param, "code": None}}


def error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status == 401:
        return "authentication_error"
    if status >= 500:
        return "server_error"
    return "invalid_request_error"


def fmt_seconds(seconds: float) -> str:
    return str(int(seconds)) if float(seconds).is_integer() else str(seconds)


def completion_body(reply: Reply, body: JSONObject, completion_id: str) -> JSONObject:
    prompt = reply.prompt_tokens if reply.prompt_tokens is not None else prompt_tokens_of(body)
    answer = reply.content if reply.content is not None else (reply.refusal_text or "")
    completion = reply.completion_tokens if reply.completion_tokens is not None else count_tokens(answer)
    choices = (
        []
        if reply.kind == "empty"
        else [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal_text},
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ]
    )
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": body.get("model", MODEL_ID),
        "choices": choices,
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def embed_text(text: str, dim: int) -> list[float]:
    """A deterministic unit vector: signed hashed bag of lowercased words."""
    vec = [0.0] * dim
    for word in _WORD.findall(text.lower()) or [text]:
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        vec[value % dim] += 1.0 if (value >> 32) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec))
    if norm == 0.0:
        vec[0], norm = 1.0, 1.0
    return [v / norm for v in vec]


def embeddings_body(texts: list[str], dim: int, b64: bool, body: JSONObject) -> JSONObject:
    """The answer to an embeddings request for `texts`, vectors of `dim` floats (base64 when `b64`)."""
    data = [
        {"object": "embedding", "index": i, "embedding": encode_vector(embed_text(t, dim), b64)}
        for i, t in enumerate(texts)
    ]
    tokens = sum(count_tokens(t) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": body.get("model", MODEL_ID),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def encode_vector(vec: list[float], b64: bool) -> list[float] | str:
    if not b64:
        return vec
    return base64.b64encode(struct.pack(f"<{len(vec)}f", *vec)).decode("ascii")
