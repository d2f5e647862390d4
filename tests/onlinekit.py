"""Test helpers for the online companion: a real uvicorn server on 127.0.0.1 in a thread,
API tokens, and a runtime built from real local parts with the SQL busy signal."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn
from dreamkit import EMBED_DIM

from dreamer.core.settings import Settings
from dreamer.embed.embedders import CachedEmbedder, OpenAIEmbedder
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.llm.client import OpenAILLM, build_openai_client
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import db
from dreamer.store.busy import SqlBusySignal

ALICE_WRITER = "alice-writer-token-0123456789"
ALICE_READER = "alice-reader-token-0123456789"
BOB_WRITER = "bob-writer-token-0123456789abc"
TOKENS = [
    {"token": ALICE_WRITER, "user_id": "alice", "role": "writer"},
    {"token": ALICE_READER, "user_id": "alice", "role": "reader"},
    {"token": BOB_WRITER, "user_id": "bob", "role": "writer"},
]


def bearer(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LiveServer:
    """uvicorn serving `app` on a free port of 127.0.0.1 until stopped."""

    def __init__(self, app) -> None:
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def online_settings(settings, **overrides):
    values = {"api_tokens": json.dumps(TOKENS), "embed_dim": EMBED_DIM}
    values.update(overrides)
    return settings.model_copy(update=values)


def online_runtime(settings, engine, server, index, *, llm: bool = True) -> Runtime:
    """A runtime on the scripted server (LLM optional), the scripted embedder and the SQL busy signal."""
    settings = settings.model_copy(update={"llm_base_url": server.url if llm else ""})
    client = build_openai_client(settings.model_copy(update={"llm_base_url": server.url}))
    model = OpenAILLM(client, model="scripted", max_retries=0, sleep=lambda s: None) if llm else None
    embedder = CachedEmbedder(OpenAIEmbedder(client, model="scripted-embed", dim=EMBED_DIM))
    busy = SqlBusySignal(engine, window_seconds=settings.busy_window_seconds)
    return Runtime.open(settings, engine=engine, llm=model, embedder=embedder, index=index, busy=busy)


@contextmanager
def live_api(root: Path) -> Iterator[LiveServer]:
    """The HTTP API of a fresh SQLite store under `root`, served live without a model (the
    scripted server embeds), with the tokens of `TOKENS`."""
    settings = online_settings(Settings(_env_file=None, data_dir=root / "data"))
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(settings, engine, scripted, EdgeIndex(root / "edge", EMBED_DIM), llm=False)
        try:
            with LiveServer(create_app(rt)) as server:
                yield server
        finally:
            rt.close()
            engine.dispose()


def chat(*texts: str) -> list[dict]:
    """Alternating user / assistant turns, user first."""
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
