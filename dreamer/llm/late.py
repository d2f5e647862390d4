"""A request its caller stops waiting for at its timeout while it is still read in the
background, until `LATE_FACTOR` times that: the server may still be working on it (a local model
on a CPU is), and the usage it reports when it answers is what the call cost (`Usage.settle`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from dreamer.core.errors import LLMTimeout
from dreamer.llm.usage import LateReply, Usage

LATE_FACTOR = 2.0  # a timed-out request is still read this many times its timeout from its start


def send_within(send: Callable[[float], Any], timeout: float, counted: int, usage: Usage) -> Any:
    """`send(limit)` in a daemon thread, `limit` being the time it may take in all; its result
    (or its error) when it ends within `timeout` seconds. Else `LLMTimeout`, the request billed in
    `usage` its `counted` prompt tokens until the server's own usage for it arrives."""
    late = LateReply(counted, time.monotonic() + timeout * LATE_FACTOR)
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = send(timeout * LATE_FACTOR)
            late.reported = reported_usage(box["value"])
        except BaseException as exc:  # handed to the caller, if it still waits
            box["error"] = exc
        finally:
            late.done.set()

    threading.Thread(target=run, name="llm-request", daemon=True).start()
    if not late.done.wait(timeout):
        usage.timed_out(late)
        raise LLMTimeout(
            f"LLM request timed out after {timeout:g}s (APITimeoutError); not sent again while the server may still be "
            "working on it (DREAMER_LLM_TIMEOUT sets the limit)"
        )
    if "error" in box:
        raise box["error"]
    return box["value"]


def reported_usage(completion: Any) -> tuple[int, int] | None:
    """The prompt and completion tokens a chat completion reports, if it reports them."""
    reported = getattr(completion, "usage", None)
    if reported is None:
        return None
    return int(getattr(reported, "prompt_tokens", 0) or 0), int(getattr(reported, "completion_tokens", 0) or 0)


def seconds_of(timeout: Any, default: float) -> float:
    """A client's timeout in seconds (its read timeout when it is an httpx `Timeout`)."""
    if isinstance(timeout, (int, float)):
        return float(timeout or default)
    return float(getattr(timeout, "read", None) or default)
