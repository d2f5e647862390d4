"""One exception tree under one root; the retryable branch carries its delay."""

from __future__ import annotations

import json
from collections.abc import Callable

from pydantic import ValidationError


class DreamerError(Exception):
    """Root of every error dreamer raises on purpose."""


class ConfigError(DreamerError):
    """A setting is missing, malformed or inconsistent."""


class Forbidden(DreamerError):
    """The caller may read this but not write it (a team member closing the leader's round)."""


class AlreadyExists(DreamerError):
    """What is to be created exists already (a team of that name)."""


class CalendarEdge(DreamerError, ValueError):
    """A stored time whose day a time zone cannot tell: it is within a day of the calendar's edge."""


class NoSpace(DreamerError):
    """Too little free space under the data folder to write there (`DREAMER_MIN_FREE_MB`)."""


class StoreError(DreamerError):
    """The SQL store cannot be reached or is not at the expected schema."""


class NotFound(DreamerError):
    """A session, memory or run that was asked for does not exist."""


class NotAllowedNow(DreamerError):
    """A change a memory's state does not allow: one not waiting for review accepted, say."""


class RunInProgress(DreamerError):
    """A dream run that is still running cannot be reverted or accepted yet."""


class IngestError(DreamerError):
    """A transcript file cannot be read at all (missing, unknown format)."""


class TooLarge(IngestError):
    """A message is over `max_message_bytes`; nothing of its request is stored."""


class IndexFailure(DreamerError):
    """The search index refused an operation."""


class ScopeRequired(IndexFailure):
    """An index query came without a scope filter."""


class IndexInUse(IndexFailure):
    """An embedded index folder is owned by another process."""


class ProviderError(DreamerError):
    """An external memory provider refused a call or answered out of its contract."""


class LLMError(DreamerError):
    """The LLM call failed for good (after retries, or not retryable)."""


class LLMInvalidOutput(LLMError):
    """The model answered, but not with output matching the schema."""


class BudgetExceeded(LLMError):
    """The pass's token budget is spent."""


class CircuitOpen(LLMError):
    """Too many consecutive LLM failures: the pass stops."""


class Retryable(DreamerError):
    """A transient failure; try again after `delay` seconds."""

    def __init__(self, message: str, delay: float = 0.0) -> None:
        super().__init__(message)
        self.delay = delay


class EndpointUnusable(LLMError):
    """The model endpoint serves no request now (an outage that outlasted the retries, a key it
    refuses, a model it does not know): not the fault of what was asked, so it does not count
    toward a session's quarantine."""


class WindowTooSmall(EndpointUnusable):
    """A request cannot fit the model's context window with room for its reply (a card too long
    for the model, or a window set too small): a setting or a model to change."""


class TransientLLMError(Retryable, EndpointUnusable):
    """429, 5xx, timeouts and dropped connections."""


class LLMTimeout(TransientLLMError):
    """The model did not answer in time (the request is not sent again: the server may still be
    working on it). Like any transient failure it is
    not counted toward the session's quarantine by itself; a dream pass counts it when the
    endpoint answered other requests meanwhile (then it is this request the model cannot
    answer in time)."""


class LeaseLost(DreamerError):
    """Another worker holds a lease this one took (it expired meanwhile): the work it guarded stops."""


class Busy(Retryable):
    """The agent is busy; the pass should wait."""


def os_reason(exc: OSError) -> str:
    """What the file system said, without the errno and path decoration ("No such file or directory")."""
    return exc.strerror or str(exc)


def json_reason(exc: json.JSONDecodeError, place: str) -> str:
    """What the JSON decoder said, and where: "Expecting value at column 1". Some of its messages
    end in "at" already ("Unterminated string starting at"), so the place follows without another."""
    msg = exc.msg.rstrip()
    return f"{msg} {place}" if msg.endswith(" at") else f"{msg} at {place}"


def validation_summary(
    exc: ValidationError, *, where: Callable[[tuple[int | str, ...]], str] | None = None, limit: int = 3
) -> str:
    """One line for a pydantic `ValidationError`: the first `limit` problems as "place: message",
    `where` naming a place from its location (default: dotted, "(root)" when empty)."""
    name = where or (lambda loc: ".".join(str(p) for p in loc) or "(root)")
    parts = [f"{name(err['loc'])}: {err['msg']}" for err in exc.errors()[:limit]]
    more = exc.error_count() - limit
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


class ApiError(DreamerError):
    """The HTTP API answered a `dreamer.client` call with an error status; `detail` is its reason."""

    def __init__(self, message: str, *, status: int, detail: object = None) -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class ApiDenied(ApiError):
    """401 or 403: the token is unknown, or may only read."""


class ApiUnavailable(ApiError, Retryable):
    """The API could not be reached, or answered 502, 503 or 504: worth trying again later."""

    def __init__(self, message: str, *, status: int = 0, detail: object = None, delay: float = 1.0) -> None:
        ApiError.__init__(self, message, status=status, detail=detail)
        self.delay = delay
