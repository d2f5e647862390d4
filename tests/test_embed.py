"""Embedders: local MiniLM (more in test_embed_minilm.py), OpenAI-compatible endpoint (tiny stdlib server), cache, factory."""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import openai
import pytest

from dreamer.core.errors import ConfigError, LLMError, TransientLLMError
from dreamer.core.settings import Settings
from dreamer.embed import embedders as embed
from dreamer.embed.embedders import CachedEmbedder, Embedder, OpenAIEmbedder, build_embedder
from dreamer.embed.minilm import MiniLMEmbedder, minilm_available
from dreamer.embed.sentence_transformer import sentence_transformers_available, set_torch_threads

needs_minilm = pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- a tiny OpenAI-compatible /v1/embeddings server ------------------------------------------


def fake_vector(text: str, dim: int) -> list[float]:
    """Deterministic, deliberately unnormalised vector derived from the text's sha256."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [float(digest[i % len(digest)]) + 1.0 for i in range(dim)]


class EmbeddingsServer:
    """Answers POST /v1/embeddings; records request bodies. Model "fixed-8" ignores `dimensions`,
    model "broken" answers 500, model "refused" answers 400."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if self.path != "/v1/embeddings":
                    self._send(404, {"error": {"message": "not found"}})
                elif body["model"] == "broken":
                    self._send(500, {"error": {"message": "boom"}})
                elif body["model"] == "refused":
                    self._send(400, {"error": {"message": "bad model"}})
                else:
                    self._send(200, server.answer(body))

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @staticmethod
    def answer(body: dict) -> dict:
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dim = 8 if body["model"] == "fixed-8" else body.get("dimensions", 8)
        data = [{"object": "embedding", "index": i, "embedding": fake_vector(t, dim)} for i, t in enumerate(texts)]
        data.reverse()  # servers may answer out of order; `index` is authoritative
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        return {"object": "list", "data": data, "model": body["model"], "usage": usage}

    @property
    def inputs(self) -> list[list[str]]:
        return [r["input"] for r in self.requests]


@pytest.fixture
def server():
    srv = EmbeddingsServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


@pytest.fixture
def client(server):
    c = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0, timeout=10)
    yield c
    c.close()


# --- OpenAIEmbedder -------------------------------------------------------------------------


def test_openai_embedder_batches_and_normalises(server, client):
    embedder = OpenAIEmbedder(client, model="text-embedding-3-small", dim=16, batch=2)
    texts = ["one", "two", "three", "four", "one"]
    vectors = embedder.embed(texts)
    assert server.inputs == [["one", "two"], ["three", "four"], ["one"]]
    assert all(r["dimensions"] == 16 and r["encoding_format"] == "float" for r in server.requests)
    assert len(vectors) == 5
    assert all(len(v) == 16 for v in vectors)
    assert all(math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-5) for v in vectors)
    expected = np.asarray(fake_vector("three", 16))
    assert np.allclose(vectors[2], expected / np.linalg.norm(expected), atol=1e-6)
    assert vectors[0] == vectors[4]
    assert vectors[0] != vectors[1]
    assert embedder.name == "openai/text-embedding-3-small"
    assert isinstance(embedder, Embedder)


def test_openai_embedder_empty_input_makes_no_request(server, client):
    assert OpenAIEmbedder(client, model="m", dim=8).embed([]) == []
    assert server.requests == []


def test_openai_embedder_without_dimensions_parameter(server, client):
    embedder = OpenAIEmbedder(client, model="m", dim=8, send_dimensions=False)
    assert len(embedder.embed(["x"])[0]) == 8
    assert "dimensions" not in server.requests[0]


def test_openai_embedder_dimension_mismatch(client):
    embedder = OpenAIEmbedder(client, model="fixed-8", dim=384)
    with pytest.raises(ConfigError, match="8-dimensional.*384"):
        embedder.embed(["x"])


def test_openai_embedder_server_errors(client):
    with pytest.raises(TransientLLMError):
        OpenAIEmbedder(client, model="broken", dim=8).embed(["x"])
    with pytest.raises(LLMError, match="400") as info:
        OpenAIEmbedder(client, model="refused", dim=8).embed(["x"])
    assert not isinstance(info.value, TransientLLMError)


def test_openai_embedder_unreachable_is_transient():
    dead = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0, timeout=2)
    with pytest.raises(TransientLLMError):
        OpenAIEmbedder(dead, model="m", dim=8).embed(["x"])


# --- CachedEmbedder ----------------------------------------------------------------------------


class CountingEmbedder:
    name = "counting"
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(len(t)), float(ord(t[0])), 1.0] for t in texts]


def test_cache_sends_only_uncached_texts_in_order():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner)
    assert (cached.name, cached.dim) == ("counting", 3)

    first = cached.embed(["aa", "b"])
    assert inner.calls == [["aa", "b"]]
    assert (cached.hits, cached.misses) == (0, 2)

    second = cached.embed(["b", "ccc", "aa"])
    assert inner.calls[-1] == ["ccc"]
    assert (cached.hits, cached.misses) == (2, 3)
    assert second == [first[1], [3.0, float(ord("c")), 1.0], first[0]]

    third = cached.embed(["dd", "dd", "b"])
    assert inner.calls[-1] == ["dd"]
    assert (cached.hits, cached.misses) == (4, 4)
    assert third[0] == third[1] == [2.0, float(ord("d")), 1.0]

    assert cached.embed(["aa", "ccc"]) == [first[0], second[1]]
    assert len(inner.calls) == 3
    assert (cached.hits, cached.misses) == (6, 4)
    assert cached.embed([]) == []
    assert len(inner.calls) == 3


def test_cache_is_bounded_lru():
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, max_entries=2)
    cached.embed(["a", "b"])
    cached.embed(["a"])  # a is now most recent
    cached.embed(["c"])  # evicts b
    assert len(cached) == 2
    inner.calls.clear()
    cached.embed(["a", "b", "c"])
    assert inner.calls == [["b"]]


def test_cache_in_front_of_openai(server, client):
    cached = CachedEmbedder(OpenAIEmbedder(client, model="m", dim=8))
    cached.embed(["x", "y"])
    cached.embed(["y", "z", "x"])
    assert server.inputs == [["x", "y"], ["z"]]
    assert (cached.hits, cached.misses) == (2, 3)


# --- MiniLM ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder(batch=2)


@needs_minilm
def test_minilm_vectors(minilm):
    texts = ["I like tea", "I enjoy drinking tea", "the server crashed"]
    tea, drink, crash = minilm.embed(texts)
    assert minilm.dim == 384
    assert all(len(v) == 384 for v in (tea, drink, crash))
    for v in (tea, drink, crash):
        assert math.isclose(float(np.linalg.norm(v)), 1.0, rel_tol=1e-4)
    assert cosine(tea, drink) > cosine(tea, crash) + 0.3
    assert minilm.embed(["I like tea"])[0] == pytest.approx(tea, abs=1e-5)


# --- build_embedder ------------------------------------------------------------------------------


def make_settings(tmp_path, **kw) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data", **kw)


def test_build_none(tmp_path):
    assert build_embedder(make_settings(tmp_path, embedder="none")) is None


@needs_minilm
def test_build_local(tmp_path):
    built = build_embedder(make_settings(tmp_path, embedder="local"))
    assert isinstance(built, CachedEmbedder)
    assert isinstance(built.inner, MiniLMEmbedder)
    assert built.dim == 384


def test_build_local_without_extra(tmp_path, monkeypatch):
    monkeypatch.setattr(embed, "minilm_available", lambda: False)
    monkeypatch.setattr(embed, "sentence_transformers_available", lambda: False)
    with pytest.raises(ConfigError, match=r"pip install 'dreamer\[local\]'"):
        build_embedder(make_settings(tmp_path, embedder="local"))


def test_build_openai_needs_a_base_url(tmp_path):
    with pytest.raises(ConfigError, match="BASE_URL"):
        build_embedder(make_settings(tmp_path, embedder="openai"))


@pytest.mark.parametrize("field", ["embed_base_url", "llm_base_url"])
def test_build_openai_from_base_url(tmp_path, server, field):
    settings = make_settings(
        tmp_path,
        embedder="openai",
        embed_model="emb",
        embed_dim=12,
        llm_max_retries=0,
        **{field: server.url},
    )
    built = build_embedder(settings)
    assert isinstance(built, CachedEmbedder)
    assert isinstance(built.inner, OpenAIEmbedder)
    assert (built.name, built.dim) == ("openai/emb", 12)
    vectors = built.embed(["hello", "world"])
    assert [len(v) for v in vectors] == [12, 12]
    assert server.requests[0]["model"] == "emb"


def test_build_openai_prefers_embed_base_url(tmp_path, server):
    settings = make_settings(
        tmp_path, embedder="openai", embed_base_url=server.url, llm_base_url="http://127.0.0.1:9/v1"
    )
    built = build_embedder(settings)
    built.embed(["x"])
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("embed_key", "llm_key", "sent"),
    [("emb-key", "chat-key", "emb-key"), ("", "chat-key", "chat-key"), ("", "", "none")],
)
def test_build_openai_api_key(tmp_path, server, embed_key, llm_key, sent):
    """The embeddings endpoint may be another provider's: its own key, else the LLM's."""
    settings = make_settings(
        tmp_path, embedder="openai", embed_base_url=server.url, embed_api_key=embed_key, llm_api_key=llm_key
    )
    built = build_embedder(settings)
    assert built.inner.client.api_key == sent
    assert len(built.embed(["x"])) == 1


def test_build_openai_with_client_handed_in(tmp_path, server, client):
    settings = make_settings(tmp_path, embedder="openai", embed_dim=8)
    built = build_embedder(settings, openai_client=client)
    assert built.inner.client is client
    assert len(built.embed(["x"])[0]) == 8


@needs_minilm
def test_build_auto_prefers_minilm(tmp_path, server):
    built = build_embedder(make_settings(tmp_path, embedder="auto", llm_base_url=server.url))
    assert isinstance(built.inner, MiniLMEmbedder)


def test_build_auto_falls_back_to_openai_then_none(tmp_path, server, monkeypatch):
    monkeypatch.setattr(embed, "local_available", lambda: False)
    settings = make_settings(tmp_path, embedder="auto", llm_base_url=server.url, embed_dim=8)
    built = build_embedder(settings)
    assert isinstance(built.inner, OpenAIEmbedder)
    assert build_embedder(make_settings(tmp_path, embedder="auto")) is None


def test_set_torch_threads_sets_a_positive_count_with_torch_and_says_none_without():
    if not sentence_transformers_available():  # the quick start's install: no torch
        assert set_torch_threads(1) is None
        return
    import torch

    before = torch.get_num_threads()
    try:
        assert set_torch_threads(1) == 1
        assert set_torch_threads(0) == 1  # 0 leaves what is in effect
        assert set_torch_threads(2) == 2 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


def test_set_embedder_threads_limits_numpys_blas_in_this_process():
    code = (
        "from threadpoolctl import threadpool_info\n"
        "from dreamer.embed.threads import set_embedder_threads\n"
        "default = set_embedder_threads(0)\n"
        "print(default >= 1, set_embedder_threads(1),"
        " [p['num_threads'] for p in threadpool_info() if p['user_api'] == 'blas'])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "1", "[1]"]
