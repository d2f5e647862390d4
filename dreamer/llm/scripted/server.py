"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests and offline runs.

It serves ``POST /v1/chat/completions`` from a queue of :class:`Reply` objects
(then a script callable, then the team card answered from the request by `scripted_team`,
else a default ``{}`` answer), deterministic hashed bag-of-words vectors on ``POST /v1/embeddings`` and a one-model list on
``GET /v1/models``. Replies can also be faults: HTTP errors with Retry-After,
delays, malformed bodies, truncated JSON, empty choices, refusals and dropped
connections.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dreamer.llm.scripted.bodies import (
    JSONObject,
    completion_body,
    embeddings_body,
    error_body,
    error_type,
    fmt_seconds,
    model_entry,
)
from dreamer.llm.scripted.modes import (
    FORMATS,
    SCHEMA_UNSUPPORTED,
    WINDOW_SOURCES,
    WRAPS,
    cut_reply,
    format_refusal,
    model_extras,
    overflow,
    props_body,
    show_body,
    wrapped,
)
from dreamer.llm.scripted.reply import Reply
from dreamer.llm.scripted.screen import is_screen_request, screen_reply
from dreamer.llm.scripted.team import team_reply

log = logging.getLogger(__name__)

__all__ = ["SCHEMA_UNSUPPORTED", "Reply", "Script", "ScriptedServer", "main"]

DEFAULT_WINDOW = 128_000  # tokens: the window the scripted model tells and keeps to, as a hosted one's

Script = Callable[[JSONObject], Reply]


def _take(queue: deque[list[Any]]) -> Reply | None:
    """The first queued reply, counting down its repeats (the caller holds the lock); None when empty."""
    if not queue:
        return None
    slot = queue[0]
    slot[1] -= 1
    if slot[1] <= 0:
        queue.popleft()
    reply: Reply = slot[0]
    return reply


class ScriptedServer:
    """A real HTTP server in a daemon thread; replies come from a queue or a script."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        embed_dim: int = 384,
        json_schema: bool = True,
        formats: str = "openai",
        wrap: str | None = None,
        context_window: int | None = DEFAULT_WINDOW,
        window_source: str | None = "models",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        """`formats`, `wrap` and `window_source` take on another server's ways (`scripted_modes`):
        how it treats `response_format`, how its replies come wrapped, where it tells its window;
        `context_window` is enforced (a request over it gets the 400 a server sends)."""
        if formats not in FORMATS or (wrap is not None and wrap not in WRAPS):
            raise ValueError(f"formats is one of {FORMATS}, wrap one of {WRAPS}")
        self.embed_dim = embed_dim
        self.formats = formats if json_schema else "no-json-schema"
        self.wrap = wrap
        self.context_window = context_window
        self.window_source = window_source
        self._script = script
        self._screen: Script = screen_reply
        self._address = (host, port)
        self._lock = threading.Lock()
        self._queue: deque[list[Any]] = deque()
        self._embed_queue: deque[list[Any]] = deque()
        self._requests: list[JSONObject] = []
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # --- lifecycle ----------------------------------------------------------
    def start(self) -> ScriptedServer:
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _HTTPServer(self._address, _Handler)
        self._httpd.scripted = self
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="scripted-llm", daemon=True
        )
        self._thread.start()
        log.debug("scripted server listening on %s", self.url)
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("server not started")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    # --- scripting ----------------------------------------------------------
    def push(self, *replies: Reply) -> None:
        """Queue replies; each is served `reply.repeat` times, in order."""
        with self._lock:
            for reply in replies:
                self._queue.append([reply, reply.repeat])

    def push_embeddings(self, *replies: Reply) -> None:
        """Queue faults of the embeddings endpoint (errors, delays before the vectors), in order."""
        with self._lock:
            for reply in replies:
                self._embed_queue.append([reply, reply.repeat])

    def _next_embed_fault(self) -> Reply | None:
        with self._lock:
            return _take(self._embed_queue)

    def set_script(self, fn: Script | None) -> None:
        """Answer with `fn(request_body)` once the queue is empty."""
        with self._lock:
            self._script = fn

    def set_screen(self, fn: Script) -> None:
        """Answer the screen card with `fn(request_body)` (neither queue nor script sees it)."""
        with self._lock:
            self._screen = fn

    @property
    def pending(self) -> int:
        """How many queued answers are left (counting repeats)."""
        with self._lock:
            return sum(left for _, left in self._queue)

    @property
    def requests(self) -> list[JSONObject]:
        """Recorded requests: ``path``, ``headers`` (lower-case keys), ``body``; ``usage`` once answered."""
        with self._lock:
            return list(self._requests)

    def chat_requests(self) -> list[JSONObject]:
        """Recorded request bodies sent to the chat completions endpoint."""
        return [r["body"] for r in self.requests if r["path"].endswith("/chat/completions")]

    def _record(self, path: str, headers: JSONObject, body: Any) -> JSONObject:
        entry = {"path": path, "headers": headers, "body": body}
        with self._lock:
            self._requests.append(entry)
        return entry

    def _next_reply(self, body: JSONObject) -> Reply:
        with self._lock:
            if is_screen_request(body):
                return self._screen(body)
            if (reply := _take(self._queue)) is not None:
                return reply
            script = self._script
        if script is not None:
            return script(body)
        return team_reply(body) or Reply()  # the team card is answered from the request

    def _next_id(self) -> str:
        with self._lock:
            self._counter += 1
            return f"chatcmpl-scripted-{self._counter}"


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = socket.SOMAXCONN  # a burst of clients queues instead of being refused (default 5)
    scripted: ScriptedServer


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    # --- routing --------------------------------------------------------------
    def do_GET(self) -> None:
        scripted = self.server.scripted
        scripted._record(self.path, self._headers(), None)
        entry = {**model_entry(), **model_extras(scripted.context_window, scripted.window_source)}
        props = props_body(scripted.context_window, scripted.window_source)
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [entry]})
        elif self.path.rstrip("/") == "/props" and props is not None:
            self._send_json(200, props)
        else:
            self._send_error(404, f"unknown path {self.path}", "invalid_request_error")

    def do_POST(self) -> None:
        scripted = self.server.scripted
        body = self._read_body()
        entry = scripted._record(self.path, self._headers(), body)
        path = self.path.split("?", 1)[0].rstrip("/")
        if not isinstance(body, dict):
            self._send_error(400, "request body is not a JSON object", "invalid_request_error")
        elif path.endswith("/chat/completions"):
            self._chat(scripted, body, entry)
        elif path.endswith("/embeddings"):
            self._embeddings(scripted, body)
        elif path == "/api/show" and (show := show_body(scripted.context_window, scripted.window_source)):
            self._send_json(200, show)
        else:
            self._send_error(404, f"unknown path {self.path}", "invalid_request_error")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scripted %s - " + format, self.address_string(), *args)

    # --- endpoints ----------------------------------------------------------
    def _chat(self, scripted: ScriptedServer, body: JSONObject, entry: JSONObject) -> None:
        fmt = body.get("response_format")
        entry["format"] = fmt.get("type") if isinstance(fmt, dict) else None
        refused = format_refusal(scripted.formats, body) or overflow(scripted.context_window, body)
        if refused is not None:
            self._send_json(*refused)
            return
        self._serve(scripted, scripted._next_reply(body), body, entry)

    def _serve(self, scripted: ScriptedServer, reply: Reply, body: JSONObject, entry: JSONObject) -> None:
        if reply.kind == "delay":
            if scripted._stopping.wait(reply.seconds):
                return
            self._serve(scripted, reply.then or Reply(), body, entry)
        elif reply.kind == "drop":
            self._drop()
        elif reply.kind == "error":
            self._send_reply_error(reply)
        elif reply.kind == "malformed":
            self._send_raw(200, b'{"id": "chatcmpl-broken", "choices": [ this is not json', {})
        else:
            content, cut = cut_reply(wrapped(scripted.wrap, reply.content), body.get("max_tokens"))
            reply = dataclasses.replace(reply, content=content, finish_reason="length" if cut else reply.finish_reason)
            completion = completion_body(reply, body, scripted._next_id())
            entry["usage"] = completion["usage"]
            self._send_json(200, completion)

    def _embeddings(self, scripted: ScriptedServer, body: JSONObject) -> None:
        fault = scripted._next_embed_fault()
        if fault is not None and fault.kind == "delay" and scripted._stopping.wait(fault.seconds):
            return
        if fault is not None and fault.kind == "error":
            self._send_reply_error(fault)
            return
        texts = body.get("input")
        if isinstance(texts, str):
            texts = [texts]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            message = "input must be a string or a list of strings"
            self._send_error(400, message, "invalid_request_error", param="input")
            return
        dim = int(body.get("dimensions") or scripted.embed_dim)
        self._send_json(200, embeddings_body(texts, dim, body.get("encoding_format") == "base64", body))

    # --- wire -----------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        return {key.lower(): value for key, value in self.headers.items()}

    def _read_body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send_reply_error(self, reply: Reply) -> None:
        body = (
            reply.body
            if reply.body is not None
            else error_body(f"scripted error {reply.status}", error_type(reply.status))
        )
        headers = {"Retry-After": fmt_seconds(reply.retry_after)} if reply.retry_after is not None else {}
        self._send_raw(reply.status, json.dumps(body).encode(), headers)

    def _send_error(self, status: int, message: str, kind: str, param: str | None = None) -> None:
        self._send_json(status, error_body(message, kind, param))

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_raw(status, json.dumps(obj).encode(), {})

    def _send_raw(self, status: int, payload: bytes, headers: dict[str, str]) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Connection", "close")
            for key, value in headers.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError) as exc:
            log.debug("client went away before the answer: %s", exc)
        self.close_connection = True

    def _drop(self) -> None:
        """Close with a TCP reset (SO_LINGER 0) and no answer."""
        self.close_connection = True
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


# --- command line -----------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dreamer.llm.scripted.server", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file: a list of replies served in order")
    parser.add_argument("--embed-dim", type=int, default=384)
    parser.add_argument("--no-json-schema", action="store_true", help="reject json_schema response formats")
    parser.add_argument("--formats", choices=FORMATS, default="openai", help="answer response_format as this server")
    parser.add_argument("--wrap", choices=WRAPS, help="wrap every reply in a code fence or in prose")
    parser.add_argument("--context-window", type=int, default=DEFAULT_WINDOW, help="the window told and enforced")
    parser.add_argument("--window-source", choices=WINDOW_SOURCES, default="models", help="where the window is told")
    args = parser.parse_args(argv)
    server = ScriptedServer(
        embed_dim=args.embed_dim,
        json_schema=not args.no_json_schema,
        formats=args.formats,
        wrap=args.wrap,
        context_window=args.context_window,
        window_source=args.window_source,
        host=args.host,
        port=args.port,
    )
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            server.push(*(Reply.from_dict(entry) for entry in json.load(fh)))
    with server:
        print(server.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
