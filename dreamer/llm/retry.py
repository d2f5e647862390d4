"""The retry policy of LLM requests: which failures are transient, full-jitter backoff with
Retry-After as a floor, and the errors a refused or exhausted request becomes."""

from __future__ import annotations

import logging

import openai
import tenacity

from dreamer.core.errors import (
    EndpointUnusable,
    LLMError,
    LLMTimeout,
    TransientLLMError,
)
from dreamer.llm.formats import rejects_format

log = logging.getLogger(__name__)

RETRY_AFTER_STATUSES = frozenset({429, 503})
NEVER_SERVED = frozenset(
    {501, 505}
)  # the server does not implement the method or protocol: asking again changes nothing
REFUSES_EVERY_REQUEST = frozenset({401, 403, 404})  # a bad key, no permission, an unknown model or path


def retry_delay(attempt: int, *, base: float, cap: float, retry_after: float | None, rand: float) -> float:
    """Full-jitter exponential backoff for retry number `attempt` (1-based).

    The ceiling is ``min(cap, base * 2 ** (attempt - 1))``; the wait is ``rand * ceiling``
    with ``rand`` in [0, 1). A server's Retry-After is a floor: ``max(retry_after, wait)``.
    """
    ceiling = min(cap, base * 2.0 ** max(attempt - 1, 0))
    wait = rand * ceiling
    if retry_after is not None and retry_after > wait:
        return float(retry_after)
    return wait


def is_transient(exc: BaseException) -> bool:
    """429, 5xx (but 501 and 505) and connection errors are worth retrying; a refusal of the output format (even
    as a 500) is not, nor a timeout: the server may still be working on that request, and sending
    it again would only queue a second one behind it."""
    if isinstance(exc, openai.APITimeoutError) or rejects_format(exc):
        return False
    if isinstance(exc, openai.APIConnectionError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or (exc.status_code >= 500 and exc.status_code not in NEVER_SERVED)
    return False


def retry_after_of(exc: BaseException | None) -> float | None:
    """The Retry-After seconds of a 429/503 answer, when present and numeric."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in RETRY_AFTER_STATUSES:
        return None
    value = exc.response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        log.debug("ignoring non-numeric Retry-After %r", value)
        return None
    return seconds if seconds >= 0 else None


def describe(exc: BaseException | None) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {error_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


def error_message(exc: openai.APIStatusError) -> str:
    message = exc.body.get("message") if isinstance(exc.body, dict) else None
    return message if isinstance(message, str) else exc.message


def rejected(exc: openai.APIStatusError) -> LLMError:
    """A refusal of this request (400, 413, 422: counts toward its session's quarantine), or of
    every request (401, 403, 404: a key or model to fix, not the session's fault)."""
    kind = EndpointUnusable if exc.status_code in REFUSES_EVERY_REQUEST else LLMError
    return kind(f"LLM request rejected, {describe(exc)}")


def log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    log.warning("LLM request failed (%s); retry %d in %.2fs", describe(exc), state.attempt_number, state.upcoming_sleep)


def give_up(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    kind = LLMTimeout if isinstance(exc, openai.APITimeoutError) else TransientLLMError
    raise kind(
        f"LLM unavailable after {state.attempt_number} attempts, {describe(exc)}", delay=state.upcoming_sleep
    ) from exc
