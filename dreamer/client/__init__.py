"""A small typed client of dreamer's HTTP API (`dreamer serve`), for an agent written in Python.

    from dreamer.client import Client

    with Client("http://127.0.0.1:8765", token="main-agent-token-0001") as memory:
        memory.append("chat-42", [{"role": "user", "content": "I prefer trains."}])
        block = memory.context(budget=800)["text"]
        hits = memory.recall("how does the user travel?", k=5)

`AsyncClient` has the same methods, awaited. An error answer raises `ApiError` (`ApiDenied` for
401 and 403, `ApiUnavailable` when the server cannot be reached or answers 502, 503 or 504), with
the status and the server's reason; all are `DreamerError`s.
"""

from __future__ import annotations

from dreamer.client.calls import Call, ContextBlock, Hit, Meter, Recalled, StoredMemory
from dreamer.client.http import AsyncClient, Client
from dreamer.core.errors import ApiDenied, ApiError, ApiUnavailable

__all__ = [
    "ApiDenied",
    "ApiError",
    "ApiUnavailable",
    "AsyncClient",
    "Call",
    "Client",
    "ContextBlock",
    "Hit",
    "Meter",
    "Recalled",
    "StoredMemory",
]
