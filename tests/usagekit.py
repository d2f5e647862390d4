"""A recording reverse proxy in front of a real model server: every request is passed on as it
came, every answer back as it came, and the `usage` of each chat completion is kept, so a test
can hold a run's bill against what the server itself reported. `delays` holds chat answers back
(the n-th for the n-th number of seconds) after the server gave them: a reply past the client's
timeout that the server has billed all the same."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class UsageProxy:
    """Forwards `/v1/...` (and the server root's `/props`, `/api/show`) to `target` (a base URL
    ending in /v1); `usages` lists the usage of every chat completion answered with 200."""

    def __init__(self, target: str, *, timeout: float = 600.0, delays: list[float] | None = None) -> None:
        self.target_root = target.rstrip("/").removesuffix("/v1")
        self.delays = list(delays or [])
        self.usages: list[dict[str, int]] = []
        self.statuses: list[int] = []
        self._lock = threading.Lock()
        self._http = httpx.Client(timeout=timeout)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                proxy._forward(self, "GET", None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                proxy._forward(self, "POST", self.rfile.read(length) if length else b"")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> UsageProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._http.close()

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def total(self) -> tuple[int, int]:
        """Prompt and completion tokens the server reported over every answered chat request."""
        with self._lock:
            return sum(u["prompt_tokens"] for u in self.usages), sum(u["completion_tokens"] for u in self.usages)

    def _forward(self, handler: BaseHTTPRequestHandler, method: str, body: bytes | None) -> None:
        headers = {k: v for k, v in handler.headers.items() if k.lower() in ("content-type", "authorization")}
        try:
            answer = self._http.request(method, self.target_root + handler.path, content=body, headers=headers)
        except httpx.HTTPError:
            handler.close_connection = True
            handler.connection.close()  # the server is gone: so is the answer
            return
        payload = answer.content
        delay = 0.0
        if handler.path.rstrip("/").endswith("/chat/completions"):
            with self._lock:
                self.statuses.append(answer.status_code)
                if answer.status_code == 200:
                    self.usages.append(json.loads(payload)["usage"])
                delay = self.delays.pop(0) if self.delays else 0.0
        time.sleep(delay)
        try:
            handler.send_response(answer.status_code)
            handler.send_header("Content-Type", answer.headers.get("content-type", "application/json"))
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            handler.wfile.write(payload)
        except OSError:  # the client stopped waiting: the server billed it all the same
            handler.close_connection = True
