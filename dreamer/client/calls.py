"""The calls of the HTTP API as data (method, path, query, body), the shapes of their answers, and
how an error answer becomes an exception: what the sync and the async client share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict
from urllib.parse import quote

import httpx

from dreamer.core.errors import ApiDenied, ApiError, ApiUnavailable

UNAVAILABLE = (502, 503, 504)


class StoredMemory(TypedDict):
    memory_id: str
    text: str
    kind: str
    status: str
    source: str
    evidence: list[dict[str, Any]]
    created_at: str
    updated_at: str


class Hit(TypedDict):
    memory_id: str
    text: str
    kind: str
    status: str
    score: float
    rank: int
    evidence: list[dict[str, Any]]
    created_at: str
    valid_from: str


class Recalled(TypedDict):
    query: str
    mode: str
    note: str
    hits: list[Hit]


class ContextBlock(TypedDict):
    text: str
    memory_ids: list[str]
    tokens: int


class Meter(TypedDict):
    session_id: str
    tokens: int
    flush_point: int
    cycle: int
    last_seq: int
    flushed_seq: int
    messages_since_flush: int
    cycle_flushed: bool
    flush_due: bool
    trigger: str | None
    flush_scheduled: bool


@dataclass(frozen=True)
class Call:
    """One request: what a client sends."""

    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    body: dict[str, Any] | None = None


def _segment(value: str) -> str:
    return quote(value, safe="")


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def append_call(
    session_id: str, messages: Sequence[dict[str, Any]], context_tokens: int | None, compacted: bool
) -> Call:
    body = _given(messages=list(messages), context_tokens=context_tokens)
    if compacted:
        body["compacted"] = True
    return Call("POST", f"/v1/sessions/{_segment(session_id)}/messages", body=body)


def recall_call(query: str, k: int | None, kinds: Sequence[str] | None, since: str | None, until: str | None) -> Call:
    return Call(
        "POST",
        "/v1/recall",
        body=_given(query=query, k=k, kinds=list(kinds) if kinds else None, since=since, until=until),
    )


def context_call(budget: int | None) -> Call:
    return Call("GET", "/v1/context", params=_given(budget=budget))


def remember_call(text: str, kind: str, session_id: str | None) -> Call:
    return Call("POST", "/v1/memories", body=_given(text=text, kind=kind, session_id=session_id))


def forget_call(memory_id: str, reason: str | None) -> Call:
    return Call("DELETE", f"/v1/memories/{_segment(memory_id)}", params=_given(reason=reason))


def flush_call(session_id: str) -> Call:
    return Call("POST", f"/v1/sessions/{_segment(session_id)}/flush")


def status_call() -> Call:
    return Call("GET", "/v1/status")


def compact_call(
    messages: Sequence[dict[str, Any]], budget: int | None, env_state: str | None, session_id: str | None
) -> Call:
    body = {"messages": list(messages), **_given(budget=budget, env_state=env_state, session_id=session_id)}
    return Call("POST", "/v1/context/compact", body=body)


def offloaded_call(offload_id: str) -> Call:
    return Call("GET", f"/v1/context/offloaded/{_segment(offload_id)}")


def answer(call: Call, response: httpx.Response) -> Any:
    """The JSON of a successful answer; an `ApiError` for an error status."""
    if response.is_success:
        return response.json()
    detail = _detail(response)
    reason = detail if isinstance(detail, str) else _first_problem(detail)
    message = f"{call.method} {call.path}: {response.status_code} {reason}"
    if response.status_code in (401, 403):
        raise ApiDenied(message, status=response.status_code, detail=detail)
    if response.status_code in UNAVAILABLE:
        raise ApiUnavailable(message, status=response.status_code, detail=detail, delay=_retry_after(response))
    raise ApiError(message, status=response.status_code, detail=detail)


def unreachable(call: Call, exc: httpx.TransportError) -> ApiUnavailable:
    return ApiUnavailable(f"{call.method} {call.path}: the API could not be reached ({type(exc).__name__}: {exc})")


def _detail(response: httpx.Response) -> Any:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:200] or response.reason_phrase
    return data.get("detail", data) if isinstance(data, dict) else data


def _first_problem(detail: Any) -> str:
    """A 422's first problem as "field: message"."""
    if isinstance(detail, list) and detail and isinstance(detail[0], dict):
        first = detail[0]
        where = ".".join(str(p) for p in first.get("loc", []) if p != "body")
        more = f" (and {len(detail) - 1} more)" if len(detail) > 1 else ""
        return f"{where}: {first.get('msg', '')}{more}" if where else f"{first.get('msg', '')}{more}"
    return str(detail)


def _retry_after(response: httpx.Response) -> float:
    try:
        return max(0.0, float(response.headers.get("retry-after", "1")))
    except ValueError:
        return 1.0
