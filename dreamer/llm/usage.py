"""What calls to a model used: the endpoint's reported tokens, the requests made, and the reply
items dropped as invalid; a call that timed out is billed its prompt as counted until the
server's own usage for it arrives (`LateReply`), and counted `unbilled` while it has not."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field


@dataclass
class LateReply:
    """A request that outlived its timeout, still read in the background until `deadline`
    (monotonic seconds) for the usage the server reports; `counted` is what it was billed meanwhile."""

    counted: int
    deadline: float
    reported: tuple[int, int] | None = None  # the server's prompt and completion tokens, once it answered
    done: threading.Event = field(default_factory=threading.Event)

    def wait(self) -> bool:
        """Wait until it answered or its deadline passed; whether the server's usage is known."""
        self.done.wait(max(0.0, self.deadline - time.monotonic()))
        return self.reported is not None


@dataclass
class Usage:
    """Tokens reported by the server, how many HTTP requests were made, and the items of the
    replies that were dropped (each with its reason). `unbilled` counts the calls whose cost the
    server has not reported (timed out): each is in the tokens with its prompt as counted, so the
    figures are a floor while it is above 0; `late` holds those still read in the background."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0
    dropped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is worth knowing of a reply, not an item of it
    unbilled: int = 0
    late: list[LateReply] = field(default_factory=list)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        total = Usage()
        total.add(self)
        total.add(other)
        return total

    def add(self, other: Usage) -> None:
        """Add `other` in place."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.requests += other.requests
        self.dropped += other.dropped
        self.notes += other.notes
        self.unbilled += other.unbilled
        self.late += other.late

    def timed_out(self, late: LateReply) -> None:
        """Bill a request that timed out its prompt as counted, until the server's usage comes."""
        self.prompt_tokens += late.counted
        self.unbilled += 1
        self.late.append(late)

    def settle(self, *, wait: bool = True) -> None:
        """Bill each timed-out request that has answered what the server reported instead of its
        counted prompt; with `wait`, wait for those still out first, each until its deadline."""
        out: list[LateReply] = []
        for late in self.late:
            reported = late.reported if (late.wait() if wait else late.done.is_set()) else None
            if reported is None:
                out.append(late)
                continue
            self.prompt_tokens += reported[0] - late.counted
            self.completion_tokens += reported[1]
            self.unbilled -= 1
        self.late = out
