"""Sparse vectors from Qdrant's own BM25 (`qdrant_edge.Bm25`), so both backends score text the
same way; the IDF modifier is applied by the collection."""

from __future__ import annotations

from functools import lru_cache

import qdrant_edge as qe


@lru_cache(maxsize=1)
def _bm25() -> qe.Bm25:
    """Qdrant's BM25 for English: lowercase, English stopwords, Snowball English stemmer."""
    config = qe.Bm25Config(
        language="english",
        lowercase=True,
        stopwords=qe.Language.English,
        stemmer=qe.SnowballParams(qe.SnowballLanguage.English),
    )
    return qe.Bm25(config)


def sparse_document(text: str) -> qe.SparseVector:
    """BM25 term-frequency weights of a memory text (IDF is applied by the index)."""
    return _bm25().embed_document(text)


def sparse_query(text: str) -> qe.SparseVector:
    """BM25 query vector: weight 1.0 per distinct term."""
    return _bm25().embed_query(text)
