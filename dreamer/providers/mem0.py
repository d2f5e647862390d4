"""The mem0 OSS provider (`pip install dreamer[mem0]`): mem0's `Memory`, configured against an
OpenAI-compatible endpoint for its model and its embeddings, with its own local vector store
(an on-disk Qdrant under ``data_dir/mem0``) and history database.

Turns are stored as said (``infer=False``: the dreamer does its own extraction), one mem0 user
per scope key (user, agent, team), so one scope never finds another's. mem0's telemetry is off
and its home folder is under the data folder, set before mem0 is first imported."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dreamer.core.errors import ConfigError
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.providers.contract import ProviderHit, Turn

FOLDER = "mem0"


def scope_key(scope: Scope) -> str:
    """The mem0 user a scope's turns are stored under: every owner field spelled out."""
    return "|".join(f"{f}={getattr(scope, f) or ''}" for f in ("user_id", "agent_id", "project", "team"))


def mem0_config(settings: Settings) -> dict[str, Any]:
    """mem0's configuration: the configured endpoints, a local on-disk Qdrant; `mem0_config` merged over it."""
    folder = Path(settings.data_dir) / FOLDER
    llm_url = settings.llm_base_url
    embed_url = settings.embed_base_url or llm_url
    embed_key = settings.embed_api_key or settings.llm_api_key
    config: dict[str, Any] = {
        "llm": {
            "provider": "openai",
            "config": {"model": settings.llm_model, "openai_base_url": llm_url, "api_key": settings.llm_api_key},
        },
        "embedder": {
            "provider": "openai",
            "config": {
                "model": settings.embed_model,
                "openai_base_url": embed_url,
                "api_key": embed_key,
                "embedding_dims": settings.embed_dim,
            },
        },
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "path": str(folder / "qdrant"),
                "collection_name": "dreamer",
                "embedding_model_dims": settings.embed_dim,
                "on_disk": True,
            },
        },
        "history_db_path": str(folder / "history.db"),
    }
    if settings.mem0_config.strip():
        try:
            extra = json.loads(settings.mem0_config)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"mem0_config is not valid JSON: {exc.msg} at position {exc.pos}") from exc
        if not isinstance(extra, dict):
            raise ConfigError("mem0_config must be a JSON object")
        config = merged(config, extra)
    return config


def merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """`over` merged into `base` key by key, at every depth (a value that is not an object replaces)."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        out[key] = merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


class Mem0Provider:
    """`Provider` over mem0's `Memory`."""

    name = "mem0"

    def __init__(self, memory: Any) -> None:
        self.memory = memory

    def prefetch(self, query: str, scope: Scope, k: int) -> list[ProviderHit]:
        found = self.memory.search(query, top_k=k, filters={"user_id": scope_key(scope)}, threshold=0.0)
        results = found.get("results", []) if isinstance(found, dict) else found
        return [ProviderHit(str(r["id"]), str(r["memory"]), float(r.get("score") or 0.0)) for r in results]

    def sync(self, turns: Sequence[Turn]) -> None:
        by_scope: dict[str, list[dict[str, str]]] = {}
        for t in turns:
            by_scope.setdefault(scope_key(t.scope), []).append({"role": t.role, "content": t.content})
        for key, messages in by_scope.items():
            self.memory.add(messages, user_id=key, infer=False)

    def close(self) -> None:
        client = getattr(getattr(self.memory, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()


def create(settings: Settings) -> Mem0Provider:
    """The entry point's factory: `ConfigError` when mem0 is not installed or the endpoint is unset."""
    if not (settings.embed_base_url or settings.llm_base_url):
        raise ConfigError("the mem0 provider needs an OpenAI-compatible endpoint: set DREAMER_LLM_BASE_URL")
    folder = Path(settings.data_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    os.environ.setdefault("MEM0_DIR", str(folder / "home"))
    try:
        from mem0 import Memory
    except ImportError as exc:
        raise ConfigError("the mem0 provider needs mem0ai: pip install 'dreamer[mem0]'") from exc
    memory = Memory.from_config(mem0_config(settings))
    bounded(memory, settings.llm_timeout or 30.0)
    return Mem0Provider(memory)


def bounded(memory: Any, timeout: float) -> None:
    """mem0's OpenAI clients with `timeout` and no retries of their own (the guard retries and
    its breaker decides), instead of the client's ten minutes: a call the guard gave up on
    still ends, and with it the thread that waits for it."""
    for part in ("embedding_model", "llm"):
        client = getattr(getattr(memory, part, None), "client", None)
        if client is not None and hasattr(client, "with_options"):
            getattr(memory, part).client = client.with_options(timeout=timeout, max_retries=0)
