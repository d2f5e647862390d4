"""What calls to a model used: the endpoint's reported tokens, the requests made, and the reply
items dropped as invalid."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Usage:
    """Tokens reported by the server, how many HTTP requests were made, and the items of the
    replies that were dropped (each with its reason)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is worth knowing of a reply, not an item of it

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.requests + other.requests,
            self.dropped + other.dropped,
            self.notes + other.notes,
        )

    def add(self, other: Usage) -> None:
        """Add `other` in place."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.requests += other.requests
        self.dropped += other.dropped
        self.notes += other.notes
