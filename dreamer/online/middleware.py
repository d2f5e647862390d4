"""The ASGI middleware of the HTTP API: the request body limit, and per-route metrics with the
token's scope marked busy while its `/v1/` writes run.

Reads (`GET` requests and `POST /v1/recall`) mark nothing busy: a client polling its status
or recalling between turns does not hold back its own dreaming, let alone another user's. An
agent that reads while it answers says so with the `Dreamer-In-Flight: 1` header (and a write
that should not count sends `Dreamer-In-Flight: 0`)."""

from __future__ import annotations

import time

from fastapi import HTTPException
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as ASGIScope

from dreamer.online.auth import Auth
from dreamer.online.metrics import Metrics
from dreamer.online.request_checks import answer
from dreamer.store.busy import CoalescedBusy, activity_key

BUSY_PREFIX = "/v1/"
IN_FLIGHT_HEADER = b"dreamer-in-flight"
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
READ_POSTS = frozenset({"/v1/recall"})  # a POST only for its body: a read
_YES, _NO = frozenset({b"1", b"true", b"yes"}), frozenset({b"0", b"false", b"no"})


def marks_busy(method: str, path: str, declared: bytes | None) -> bool:
    """Whether a request marks its scope busy: a `/v1/` write does, a read does not, unless
    the `Dreamer-In-Flight` header (`declared`) says otherwise. Pure."""
    if not path.startswith(BUSY_PREFIX):
        return False
    flag = (declared or b"").strip().lower()
    if flag in _YES or flag in _NO:
        return flag in _YES
    return method not in READ_METHODS and path not in READ_POSTS


class BodyLimit:
    """413 for a body over `limit` bytes: by Content-Length up front, else while it streams in."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await answer(send, 413, f"request body over {self.limit} bytes")
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"request body over {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


class Observe:
    """Request counts and latencies per route; `/v1/` writes (and reads declared in flight)
    mark their token's scope busy meanwhile."""

    def __init__(
        self, app: ASGIApp, *, metrics: Metrics, auth: Auth, busy: CoalescedBusy, fixed_paths: frozenset[str]
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.auth = auth
        self.busy = busy
        self.fixed_paths = fixed_paths

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500
        started = time.perf_counter()
        key = self._busy_key(scope)
        active = False

        async def finish() -> None:
            nonlocal active
            if active and key:
                active = False
                await run_in_threadpool(self.busy.end, key)

        async def tracked(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                await finish()  # idle again before the client sees the end of the answer
            await send(message)

        if key:
            await run_in_threadpool(self.busy.begin, key)
            active = True
        try:
            await self.app(scope, receive, tracked)
        finally:
            await finish()
            route = self._route(scope)
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)

    def _route(self, scope: ASGIScope) -> str:
        """The route template as label (never a raw path, except the app's fixed ones)."""
        path = getattr(scope.get("route"), "path", None)
        if path:
            return str(path)
        return str(scope["path"]) if scope["path"] in self.fixed_paths else "unmatched"

    def _busy_key(self, scope: ASGIScope) -> str | None:
        headers = dict(scope["headers"])  # one Authorization header: `OneAuthorization` saw to it
        if not marks_busy(scope["method"], scope["path"], headers.get(IN_FLIGHT_HEADER)):
            return None
        header = headers.get(b"authorization")
        grant = self.auth.resolve(header.decode("latin-1") if header else None)
        return activity_key(grant.user_id, grant.agent_id) if grant else None
