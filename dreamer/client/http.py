"""The sync and async clients: each method builds its `Call` and reads the answer through
`dreamer.client.calls`."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, cast

import httpx

from dreamer.client.calls import (
    Call,
    ContextBlock,
    Meter,
    Recalled,
    StoredMemory,
    answer,
    append_call,
    compact_call,
    context_call,
    flush_call,
    forget_call,
    offloaded_call,
    recall_call,
    remember_call,
    status_call,
    unreachable,
)

DEFAULT_TIMEOUT = 30.0

H = TypeVar("H", httpx.Client, httpx.AsyncClient)


def _headers(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _request(call: Call, headers: dict[str, str]) -> dict[str, Any]:
    """The arguments of `httpx.Client.request` (and of its async twin) for `call`."""
    return {
        "method": call.method,
        "url": call.path,
        "params": call.params or None,
        "json": call.body,
        "headers": headers,
    }


@contextmanager
def _reaching(call: Call) -> Iterator[None]:
    """A transport failure while sending `call` as `ApiUnavailable`."""
    try:
        yield
    except httpx.TransportError as exc:
        raise unreachable(call, exc) from exc


class _Endpoint(Generic[H]):
    """What both clients hold: their HTTP client (closed by them only when they made it) and the
    token's headers."""

    _http_type: type[H]

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        http: H | None = None,
    ) -> None:
        self._owned = http is None
        self.http: H = http or self._http_type(base_url=base_url, timeout=timeout)
        self.headers = _headers(token)


class Client(_Endpoint[httpx.Client]):
    """Sync client of one server, acting with one bearer token (its scope and role)."""

    _http_type = httpx.Client

    def _send(self, call: Call) -> Any:
        with _reaching(call):
            response = self.http.request(**_request(call, self.headers))
        return answer(call, response)

    def append(
        self,
        session_id: str,
        messages: Sequence[dict[str, Any]],
        *,
        context_tokens: int | None = None,
        compacted: bool = False,
    ) -> Meter:
        """Record a live session's new messages; the answer is its context meter."""
        return cast(Meter, self._send(append_call(session_id, messages, context_tokens, compacted)))

    def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        kinds: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> Recalled:
        """Hybrid recall over the token's memories, best hit first."""
        return cast(Recalled, self._send(recall_call(query, k, kinds, since, until)))

    def context(self, budget: int | None = None) -> ContextBlock:
        """The context block to inject (preferences and profile, cut to the budget in tokens)."""
        return cast(ContextBlock, self._send(context_call(budget)))

    def remember(self, text: str, kind: str = "preference", *, session_id: str | None = None) -> StoredMemory:
        """Remember a fact now, through consolidation (a duplicate merges)."""
        return cast(StoredMemory, self._send(remember_call(text, kind, session_id)))

    def forget(self, memory_id: str, reason: str | None = None) -> StoredMemory:
        """Forget one of the token's memories (kept for history)."""
        return cast(StoredMemory, self._send(forget_call(memory_id, reason)))

    def flush(self, session_id: str) -> dict[str, Any]:
        """Flush the session's content since its last flush into daily notes now."""
        return cast(dict[str, Any], self._send(flush_call(session_id)))

    def status(self) -> dict[str, Any]:
        """Counts of the token's scope and the last dream run."""
        return cast(dict[str, Any], self._send(status_call()))

    def compact(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        budget: int | None = None,
        env_state: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        """Compact the active context: old tool output offloaded, or the earlier part summarised."""
        return cast(dict[str, Any], self._send(compact_call(messages, budget, env_state, session_id)))

    def offloaded(self, offload_id: str) -> dict[str, Any]:
        """The body a compaction offloaded, by its marker's id."""
        return cast(dict[str, Any], self._send(offloaded_call(offload_id)))

    def close(self) -> None:
        if self._owned:
            self.http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Endpoint[httpx.AsyncClient]):
    """`Client`'s methods, awaited (over `httpx.AsyncClient`)."""

    _http_type = httpx.AsyncClient

    async def _send(self, call: Call) -> Any:
        with _reaching(call):
            response = await self.http.request(**_request(call, self.headers))
        return answer(call, response)

    async def append(
        self,
        session_id: str,
        messages: Sequence[dict[str, Any]],
        *,
        context_tokens: int | None = None,
        compacted: bool = False,
    ) -> Meter:
        return cast(Meter, await self._send(append_call(session_id, messages, context_tokens, compacted)))

    async def recall(
        self,
        query: str,
        *,
        k: int | None = None,
        kinds: Sequence[str] | None = None,
        since: str | None = None,
        until: str | None = None,
    ) -> Recalled:
        return cast(Recalled, await self._send(recall_call(query, k, kinds, since, until)))

    async def context(self, budget: int | None = None) -> ContextBlock:
        return cast(ContextBlock, await self._send(context_call(budget)))

    async def remember(self, text: str, kind: str = "preference", *, session_id: str | None = None) -> StoredMemory:
        return cast(StoredMemory, await self._send(remember_call(text, kind, session_id)))

    async def forget(self, memory_id: str, reason: str | None = None) -> StoredMemory:
        return cast(StoredMemory, await self._send(forget_call(memory_id, reason)))

    async def flush(self, session_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], await self._send(flush_call(session_id)))

    async def compact(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        budget: int | None = None,
        env_state: str | None = None,
        session_id: str | None = None,
    ) -> dict[str, Any]:
        return cast(dict[str, Any], await self._send(compact_call(messages, budget, env_state, session_id)))

    async def offloaded(self, offload_id: str) -> dict[str, Any]:
        return cast(dict[str, Any], await self._send(offloaded_call(offload_id)))

    async def status(self) -> dict[str, Any]:
        return cast(dict[str, Any], await self._send(status_call()))

    async def aclose(self) -> None:
        if self._owned:
            await self.http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
