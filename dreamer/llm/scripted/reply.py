"""One scripted answer to a chat completion request: a message, or a fault (an HTTP error with
Retry-After, a delay, a malformed body, truncated JSON, empty choices, a refusal, a dropped
connection)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

JSONObject = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat completion request."""

    kind: str = "message"  # message | error | malformed | empty | drop | delay
    content: str | None = "{}"
    finish_reason: str = "stop"
    refusal_text: str | None = None
    status: int = 200
    body: Any = None
    retry_after: float | None = None
    seconds: float = 0.0
    then: Reply | None = None
    repeat: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def json(cls, obj: Any) -> Reply:
        """A completion whose content is ``json.dumps(obj)``."""
        return cls(content=json.dumps(obj))

    @classmethod
    def text(cls, s: str) -> Reply:
        return cls(content=s)

    @classmethod
    def error(cls, status: int, body: Any = None, retry_after: float | None = None) -> Reply:
        """An HTTP error with an OpenAI-style error body (or `body` as given)."""
        return cls(kind="error", content=None, status=status, body=body, retry_after=retry_after)

    @classmethod
    def delay(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Sleep `seconds`, then answer with `then` (default: ``{}``)."""
        return cls(kind="delay", seconds=seconds, then=then or cls())

    @classmethod
    def malformed(cls) -> Reply:
        """HTTP 200, JSON content type, a body that is not JSON."""
        return cls(kind="malformed", content=None)

    @classmethod
    def truncated(cls, obj: Any) -> Reply:
        """A completion cut in the middle of its JSON, finish_reason ``length``."""
        full = json.dumps(obj)
        return cls(content=full[: len(full) // 2], finish_reason="length")

    @classmethod
    def empty_choices(cls) -> Reply:
        return cls(kind="empty", content=None)

    @classmethod
    def refusal(cls, text: str) -> Reply:
        """A message with ``refusal`` set and ``content`` null."""
        return cls(content=None, refusal_text=text)

    @classmethod
    def drop(cls) -> Reply:
        """Reset the connection without answering."""
        return cls(kind="drop", content=None)

    @classmethod
    def from_dict(cls, data: JSONObject) -> Reply:
        """Build a reply from the CLI script form: json / text / error (+ retry_after, repeat, delay)."""
        if "json" in data:
            reply = cls.json(data["json"])
        elif "text" in data:
            reply = cls.text(data["text"])
        elif "error" in data:
            reply = cls.error(int(data["error"]), data.get("body"), data.get("retry_after"))
        else:
            raise ValueError(f"script entry needs json, text or error: {data!r}")
        if data.get("delay"):
            reply = cls.delay(float(data["delay"]), reply)
        return reply.times(int(data.get("repeat", 1)))

    def times(self, n: int) -> Reply:
        """The same reply, served `n` times."""
        if n < 1:
            raise ValueError("repeat must be >= 1")
        return dataclasses.replace(self, repeat=n)

    def with_usage(self, prompt_tokens: int, completion_tokens: int) -> Reply:
        """The same reply reporting these usage numbers instead of computed ones."""
        return dataclasses.replace(self, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
