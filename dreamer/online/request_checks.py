"""Checks of a request's raw bytes that decoding would hide: one `Authorization` header, and
identifiers in valid UTF-8.

The server decodes a path or query string with invalid UTF-8 by replacing the bad bytes with
U+FFFD, so ``/v1/sessions/%FE%FF`` and ``/v1/sessions/%FF%FE`` would name one session; here
such an identifier is refused (422, naming the field), never altered. Two `Authorization`
headers would be read differently by different readers (the first, the last); such a request
is refused (400) before anything reads it.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, unquote_to_bytes

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as ASGIScope

TWO_AUTHORIZATIONS = "more than one Authorization header: send exactly one"


def not_utf8(raw: bytes) -> bool:
    """Whether `raw` is not valid UTF-8."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def invalid_utf8_fields(template: str, raw_path: bytes, query_string: bytes) -> list[str]:
    """The path parameters (named as in the route `template`) and query parameters whose raw
    percent-decoded bytes are not valid UTF-8, in the order they appear. Pure."""
    bad: list[str] = []
    for part, segment in zip(template.split("/"), raw_path.split(b"/")):
        if part.startswith("{") and not_utf8(unquote_to_bytes(segment)):
            bad.append(part.strip("{}").split(":")[0])
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, encoding="latin-1")
    for key, value in pairs:
        if not_utf8(key.encode("latin-1")):
            bad.append("a query parameter name")
        elif not_utf8(value.encode("latin-1")):
            bad.append(key)
    return bad


def utf8_ids(request: Request) -> None:
    """A dependency of every route: 422 naming the first path or query parameter that is not
    valid UTF-8."""
    raw_path = request.scope.get("raw_path")
    template = str(getattr(request.scope.get("route"), "path", ""))
    bad = invalid_utf8_fields(template, raw_path or b"", request.scope.get("query_string", b""))
    if bad:
        raise HTTPException(422, f"{bad[0]} is not valid UTF-8")


class OneAuthorization:
    """400 for a request that carries more than one `Authorization` header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: ASGIScope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and sum(1 for k, _ in scope["headers"] if k.lower() == b"authorization") > 1:
            return await answer(send, 400, TWO_AUTHORIZATIONS)
        await self.app(scope, receive, send)


async def answer(send: Send, status: int, detail: str) -> None:
    """A JSON ``{"detail": ...}`` answer sent before the app saw the request (the connection closed after it)."""
    body = json.dumps({"detail": detail}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
