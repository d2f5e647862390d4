"""Helpers shared by the reliability tests: runtimes built from real local parts (SQLite or
PostgreSQL, the scripted OpenAI-compatible server through the real openai client, a Qdrant
Edge index), sessions, and whole-store reads."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import select

from dreamer.core.models import Cursor, Memory, MemoryEvent
from dreamer.embed.embedders import CachedEmbedder, OpenAIEmbedder
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.llm.client import OpenAILLM, build_openai_client
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope

DIM = 64
FILLER = ["ok", "sure", "fine", "thanks", "noted", "great", "right", "yes"]


def runtime(
    settings,
    engine,
    server,
    tmp_path: Path,
    *,
    llm: bool = True,
    max_retries: int = 2,
    sleeps: list | None = None,
    busy=None,
    dim: int = DIM,
) -> Runtime:
    """A runtime on the scripted server (LLM optional), its embeddings, and Edge in `tmp_path`."""
    settings = settings.model_copy(update={"llm_base_url": server.url if llm else "", "embed_dim": dim})
    client = build_openai_client(settings.model_copy(update={"llm_base_url": server.url}))
    sleep = sleeps.append if sleeps is not None else (lambda seconds: None)
    model = (
        OpenAILLM(client, model="scripted", max_retries=max_retries, retry_base=0.5, retry_cap=4.0, sleep=sleep)
        if llm
        else None
    )
    embedder = CachedEmbedder(OpenAIEmbedder(client, model="scripted-embed", dim=dim))
    index = DocumentedIndex.from_settings(
        EdgeIndex(tmp_path / "edge", dim), engine, settings, embedder
    )  # as production builds it
    rt = Runtime.open(
        settings,
        engine=engine,
        llm=model,
        embedder=embedder,
        index=index,
        busy=busy if busy is not None else AlwaysIdle(),
    )
    rt.own(index)
    return rt


def session_with(*user_lines: str, rounds: int = 4) -> list[dict]:
    """Alternating user / assistant turns: the given user lines, padded with filler to `rounds`."""
    texts = list(user_lines) + FILLER[: max(0, rounds - len(user_lines))]
    out: list[dict] = []
    for i, text in enumerate(texts):
        out += [{"role": "user", "content": text}, {"role": "assistant", "content": f"reply {i}"}]
    return out


def memories(engine, user_id: str | None = None) -> list[Memory]:
    with session_scope(engine) as s:
        q = select(Memory).order_by(Memory.created_at, Memory.id)
        if user_id is not None:
            q = q.where(Memory.user_id == user_id)
        return list(s.exec(q).all())


def events(engine) -> list[MemoryEvent]:
    with session_scope(engine) as s:
        return list(s.exec(select(MemoryEvent)).all())


def cursor(engine, session_id: int) -> Cursor:
    with session_scope(engine) as s:
        return s.get(Cursor, session_id)


def chat_bodies(server) -> list[dict]:
    return [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]


def tokens_billed(server) -> int:
    """Prompt plus completion tokens the server reported for every answered chat request."""
    return sum(
        r["usage"]["total_tokens"] for r in server.requests if r["path"].endswith("/chat/completions") and "usage" in r
    )
