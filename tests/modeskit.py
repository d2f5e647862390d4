"""Test helpers for memory modes: the live API over the dreamer's own memory (embedded by one
scripted server) beside the real mem0 provider, whose model and embeddings are a second scripted
server on a fixed port, so it can be stopped and started again at the same address."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from dreamkit import EMBED_DIM
from onlinekit import TOKENS, LiveServer, free_port

from dreamer.core.settings import Settings
from dreamer.embed.embedders import CachedEmbedder, OpenAIEmbedder
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.llm.client import build_openai_client
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import db


@dataclass
class Modes:
    url: str
    rt: Runtime
    own: ScriptedServer  # the dreamer's embeddings
    mem0: ScriptedServer  # the provider's model and embeddings
    settings: Settings


def mode_settings(root: Path, mode: str, mem0_url: str, **overrides) -> Settings:
    values = {
        "data_dir": root / "data",
        "api_tokens": json.dumps(TOKENS),
        "embed_dim": EMBED_DIM,
        "memory_mode": mode,
        "llm_base_url": mem0_url,  # the provider's model; the dreamer itself is handed none
        "llm_model": "scripted",
        "embed_model": "scripted-embed",
        "provider_deadline_ms": 2000,
        "provider_breaker_failures": 2,
        "provider_breaker_cooldown_seconds": 3600.0,
        "provider_sync_retries": 0,
        **overrides,
    }
    return Settings(_env_file=None, **values)


@contextmanager
def modes_api(root: Path, mode: str, **overrides) -> Iterator[Modes]:
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    port = free_port()
    with ScriptedServer(embed_dim=EMBED_DIM) as own, ScriptedServer(embed_dim=EMBED_DIM, port=port) as mem0:
        settings = mode_settings(root, mode, mem0.url, **overrides)
        client = build_openai_client(settings.model_copy(update={"llm_base_url": own.url}))
        embedder = CachedEmbedder(OpenAIEmbedder(client, model="scripted-embed", dim=EMBED_DIM))
        index = EdgeIndex(root / "edge", EMBED_DIM)
        rt = Runtime.open(settings, engine=engine, llm=None, embedder=embedder, index=index)
        try:
            with LiveServer(create_app(rt)) as server:
                yield Modes(server.url, rt, own, mem0, settings)
        finally:
            rt.close()
            engine.dispose()
