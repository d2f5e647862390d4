"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 for tests and offline runs.

It serves ``POST /v1/chat/completions`` from a queue of :class:`Reply` objects
(then a script callable, then a default ``{}`` answer), deterministic hashed
bag-of-words vectors on ``POST /v1/embeddings`` and a one-model list on
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
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from dreamer.llm.scripted_bodies import (
    JSONObject,
    completion_body,
    embeddings_body,
    error_body,
    error_type,
    fmt_seconds,
    model_entry,
)

log = logging.getLogger(__name__)

SCHEMA_UNSUPPORTED = "response_format json_schema is not supported"

Script = Callable[[JSONObject], "Reply"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer to a chat completion request."""

    kind: str = "message"  # message | error | malformed | empty | drop | delay
    content: str | None = "{}"
    finish_reason: str = "stop"
    refusal_text: str | None = None
    status: int = 200
    body: Any = None
    retry_after: float | None = None
    seconds: float = 0.0
    then: Reply | None = None
    repeat: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @classmethod
    def json(cls, obj: Any) -> Reply:
        """A completion whose content is ``json.dumps(obj)``."""
        return cls(content=json.dumps(obj))

    @classmethod
    def text(cls, s: str) -> Reply:
        return cls(content=s)

    @classmethod
    def error(cls, status: int, body: Any = None, retry_after: float | None = None) -> Reply:
        """An HTTP error with an OpenAI-style error body (or `body` as given)."""
        return cls(kind="error", content=None, status=status, body=body, retry_after=retry_after)

    @classmethod
    def delay(cls, seconds: float, then: Reply | None = None) -> Reply:
        """Sleep `seconds`, then answer with `then` (default: ``{}``)."""
        return cls(kind="delay", seconds=seconds, then=then or cls())

    @classmethod
    def malformed(cls) -> Reply:
        """HTTP 200, JSON content type, a body that is not JSON."""
        return cls(kind="malformed", content=None)

    @classmethod
    def truncated(cls, obj: Any) -> Reply:
        """A completion cut in the middle of its JSON, finish_reason ``length``."""
        full = json.dumps(obj)
        return cls(content=full[: len(full) // 2], finish_reason="length")

    @classmethod
    def empty_choices(cls) -> Reply:
        return cls(kind="empty", content=None)

    @classmethod
    def refusal(cls, text: str) -> Reply:
        """A message with ``refusal`` set and ``content`` null."""
        return cls(content=None, refusal_text=text)

    @classmethod
    def drop(cls) -> Reply:
        """Reset the connection without answering."""
        return cls(kind="drop", content=None)

    @classmethod
    def from_dict(cls, data: JSONObject) -> Reply:
        """Build a reply from the CLI script form: json / text / error (+ retry_after, repeat, delay)."""
        if "json" in data:
            reply = cls.json(data["json"])
        elif "text" in data:
            reply = cls.text(data["text"])
        elif "error" in data:
            reply = cls.error(int(data["error"]), data.get("body"), data.get("retry_after"))
        else:
            raise ValueError(f"script entry needs json, text or error: {data!r}")
        if data.get("delay"):
            reply = cls.delay(float(data["delay"]), reply)
        return reply.times(int(data.get("repeat", 1)))

    def times(self, n: int) -> Reply:
        """The same reply, served `n` times."""
        if n < 1:
            raise ValueError("repeat must be >= 1")
        return dataclasses.replace(self, repeat=n)

    def with_usage(self, prompt_tokens: int, completion_tokens: int) -> Reply:
        """The same reply reporting these usage numbers instead of computed ones."""
        return dataclasses.replace(self, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


class ScriptedServer:
    """A real HTTP server in a daemon thread; replies come from a queue or a script."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        embed_dim: int = 384,
        json_schema: bool = True,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.embed_dim = embed_dim
        self.json_schema = json_schema
        self._script = script
        self._address = (host, port)
        self._lock = threading.Lock()
        self._queue: deque[list[Any]] = deque()
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

    def set_script(self, fn: Script | None) -> None:
        """Answer with `fn(request_body)` once the queue is empty."""
        with self._lock:
            self._script = fn

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
            if self._queue:
                slot = self._queue[0]
                slot[1] -= 1
                if slot[1] <= 0:
                    self._queue.popleft()
                reply: Reply = slot[0]
                return reply
            script = self._script
        return script(body) if script is not None else Reply()

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
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"object": "list", "data": [model_entry()]})
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
        else:
            self._send_error(404, f"unknown path {self.path}", "invalid_request_error")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("scripted %s - " + format, self.address_string(), *args)

    # --- endpoints ----------------------------------------------------------
    def _chat(self, scripted: ScriptedServer, body: JSONObject, entry: JSONObject) -> None:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema" and not scripted.json_schema:
            self._send_error(400, SCHEMA_UNSUPPORTED, "invalid_request_error", param="response_format")
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
            completion = completion_body(reply, body, scripted._next_id())
            entry["usage"] = completion["usage"]
            self._send_json(200, completion)

    def _embeddings(self, scripted: ScriptedServer, body: JSONObject) -> None:
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
    parser = argparse.ArgumentParser(prog="python -m dreamer.llm.scripted", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file: a list of replies served in order")
    parser.add_argument("--embed-dim", type=int, default=384)
    parser.add_argument("--no-json-schema", action="store_true", help="reject json_schema response formats")
    args = parser.parse_args(argv)
    server = ScriptedServer(
        embed_dim=args.embed_dim, json_schema=not args.no_json_schema, host=args.host, port=args.port
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
