"""The runtime a process builds from its settings: the index it opens on its own is the
documented one, so production recall searches each memory with the words around its evidence."""

from __future__ import annotations

import gc

import pytest
from dreamkit import EMBED_DIM, extraction_script

from dreamer.core.scope import Scope
from dreamer.embed.embedders import CachedEmbedder, MiniLMEmbedder, OpenAIEmbedder, minilm_available
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.dream import dream_pass
from dreamer.engine.runtime import Runtime, settle
from dreamer.engine.shared_index import open_shared_runtime
from dreamer.ingest.store import record_messages
from dreamer.llm.client import OpenAILLM, build_openai_client
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.recall import recall
from dreamer.store.busy import AlwaysIdle

SESSION = [
    {"role": "user", "content": "Book the night train to Lisbon for Friday."},
    {"role": "assistant", "content": "Done, a sleeper cabin."},
    {"role": "user", "content": "I prefer a lower berth."},
    {"role": "assistant", "content": "Noted."},
]


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=EMBED_DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


def _parts(settings, server) -> dict:
    client = build_openai_client(settings.model_copy(update={"llm_base_url": server.url}))
    return {
        "llm": OpenAILLM(client, model="scripted", max_retries=0, sleep=lambda s: None),
        "embedder": CachedEmbedder(OpenAIEmbedder(client, model="scripted-embed", dim=EMBED_DIM)),
        "busy": AlwaysIdle(),
    }


@pytest.mark.parametrize("opener", ["runtime", "shared"])
def test_the_index_a_runtime_opens_finds_a_memory_by_the_words_around_its_evidence(
    opener, settings, sqlite_engine, server
):
    st = settings.model_copy(update={"min_rounds": 1, "embed_dim": EMBED_DIM, "recall_search": "text"})
    parts = _parts(st, server)
    if opener == "runtime":
        rt = Runtime.open(st, engine=sqlite_engine, **parts)
    else:
        rt = open_shared_runtime(st, engine=sqlite_engine, **parts)
    try:
        record_messages(sqlite_engine, "trip", SESSION, user_id="ana")
        assert dream_pass(rt).added == 1
        assert isinstance(rt.index, DocumentedIndex)
        found = recall(rt, "Lisbon", Scope(user_id="ana"), k=3)
        mid = found.hits[0].memory_id
        own, said = rt.index.candidate_scores(rt.embedder.embed(["Lisbon"])[0], Scope(user_id="ana"), [mid])
    finally:
        rt.close()
    assert [h.text for h in found.hits] == ["The user prefers a lower berth."]
    assert (list(own), list(said)) == ([mid], [mid])  # indexed with the vector of the message it rests on


@pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")
def test_settle_loads_the_local_model_then_freezes_the_heap(settings, sqlite_engine):
    embedder = CachedEmbedder(MiniLMEmbedder())
    rt = Runtime.open(settings, engine=sqlite_engine, llm=None, embedder=embedder, index=None, busy=AlwaysIdle())
    try:
        assert embedder.inner._model is None
        assert settle(rt) > 100_000  # the libraries and the model
        assert embedder.inner._model is not None
    finally:
        gc.unfreeze()


@pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")
def test_settle_without_the_model_leaves_it_unloaded(settings, sqlite_engine):
    embedder = CachedEmbedder(MiniLMEmbedder())
    rt = Runtime.open(settings, engine=sqlite_engine, llm=None, embedder=embedder, index=None, busy=AlwaysIdle())
    try:
        assert settle(rt, load_model=False) > 0
        assert embedder.inner._model is None  # a scheduler that only enqueues never embeds
    finally:
        gc.unfreeze()


def test_settle_leaves_a_remote_embedder_alone(settings, sqlite_engine, server):
    embedder = _parts(settings, server)["embedder"]
    rt = Runtime.open(settings, engine=sqlite_engine, llm=None, embedder=embedder, index=None, busy=AlwaysIdle())
    try:
        assert settle(rt) > 0
        assert server.requests == []  # no embeddings request at start-up
    finally:
        gc.unfreeze()
