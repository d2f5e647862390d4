"""One text at a time through ONNX Runtime: the same vector as torch, exported once and reused,
and torch kept whenever the export cannot be used."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from dreamer.core.settings import Settings
from dreamer.embed.embedders import MiniLMEmbedder, build_embedder, minilm_available
from dreamer.embed.onnx_query import export_name

pytestmark = pytest.mark.skipif(not minilm_available(), reason="the `local` extra is not installed")

TEXTS = ["I like tea", "what does the user like about Caroline's pottery?", "ok " * 400, "é ✓ 東京"]
EXPORT = export_name("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("model-cache")


@pytest.fixture(scope="module")
def exported(cache):
    embedder = MiniLMEmbedder(cache_dir=cache)
    embedder.embed(["load"])
    return embedder


@pytest.mark.parametrize("text", TEXTS)
def test_one_text_is_what_encode_gives_to_within_1e_6(exported, text):
    assert exported._query is not None
    (vector,) = exported.embed([text])
    expected = exported._load().encode([text], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert len(vector) == 384
    assert float(np.abs(np.asarray(vector) - expected).max()) < 1e-6


def test_batches_stay_on_torch(exported):
    vectors = exported.embed(TEXTS[:2])
    expected = exported._load().encode(TEXTS[:2], normalize_embeddings=True, convert_to_numpy=True)
    assert vectors == np.asarray(expected, dtype=np.float32).tolist()


def test_the_export_is_made_once_and_reused_by_the_next_process(exported, cache, caplog):
    path = cache / EXPORT
    before = (path.stat().st_ino, path.stat().st_mtime_ns)
    with caplog.at_level(logging.INFO, logger="dreamer.embed.onnx_query"):
        again = MiniLMEmbedder(cache_dir=cache)
        (vector,) = again.embed([TEXTS[1]])
    assert again._query is not None
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == before
    assert "exported" not in caplog.text
    assert vector == exported.embed([TEXTS[1]])[0]
    assert sorted(p.name for p in cache.iterdir()) == [EXPORT]  # no temporary file left behind
    assert oct(path.stat().st_mode & 0o777) == "0o644"


def test_a_cache_that_cannot_be_written_keeps_torch_and_says_why_once(tmp_path, caplog):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the folder should be")
    with caplog.at_level(logging.WARNING, logger="dreamer.embed.onnx_query"):
        embedder = MiniLMEmbedder(cache_dir=blocked)
        (vector,) = embedder.embed([TEXTS[0]])
        embedder.embed([TEXTS[1]])
    assert embedder._query is None
    expected = embedder._load().encode([TEXTS[0]], normalize_embeddings=True, convert_to_numpy=True)[0]
    assert vector == np.asarray(expected, dtype=np.float32).tolist()  # torch's own vector
    [record] = caplog.records
    assert record.getMessage().startswith(
        f"queries are embedded by torch: the ONNX export at {blocked / EXPORT} is unusable ("
    )


def test_a_cached_file_that_is_not_the_model_is_exported_afresh(tmp_path, exported):
    (tmp_path / EXPORT).write_bytes(b"not an ONNX graph")
    embedder = MiniLMEmbedder(cache_dir=tmp_path)
    (vector,) = embedder.embed([TEXTS[1]])
    assert embedder._query is not None
    assert (tmp_path / EXPORT).stat().st_size > 1_000_000
    assert vector == exported.embed([TEXTS[1]])[0]


def test_the_cache_folder_comes_from_the_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert Settings(_env_file=None).model_cache == tmp_path / "xdg" / "dreamer"
    assert Settings(_env_file=None, model_cache_dir="").model_cache is None
    built = build_embedder(Settings(_env_file=None, embedder="local", model_cache_dir=str(tmp_path / "m")))
    assert built.inner.cache_dir == tmp_path / "m"
    without = build_embedder(Settings(_env_file=None, embedder="local", model_cache_dir=""))
    assert without.inner.cache_dir is None


def test_threads_embedding_one_text_and_batches_at_once_get_their_own_vectors(exported):
    import threading

    one = exported.embed([TEXTS[1]])[0]
    batch = exported.embed(TEXTS[:2])
    results, errors = [], []

    def work(k):
        try:
            for i in range(15):
                results.append(
                    exported.embed([TEXTS[1]])[0] == one if (i + k) % 2 else exported.embed(TEXTS[:2]) == batch
                )
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (errors, len(results), all(results)) == ([], 60, True)
