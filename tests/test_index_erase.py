"""`MemoryIndex.erase`: the erased points are gone from every file of the index (Qdrant Edge's
segments and write-ahead log, local mode's SQLite file) while the other points keep their
vectors and payloads, and are searched as before; a server (here: local mode in memory) only
deletes. Real Qdrant Edge and qdrant-client local mode."""

from __future__ import annotations

import random

import pytest
from qdrant_client import QdrantClient

from dreamer.core.errors import IndexInUse
from dreamer.core.scope import Scope
from dreamer.index.contract import IndexPoint
from dreamer.index.edge import REWRITE_SUFFIX, EdgeIndex
from dreamer.index.server import QdrantClientIndex

DIM = 8
GONE, KEPT = "zorblaxian", "plinthwort"


def points(n: int = 40) -> list[IndexPoint]:
    rnd = random.Random(3)

    def vector() -> list[float]:
        return [rnd.random() for _ in range(DIM)]

    return [
        IndexPoint(
            f"m{i}",
            f"The user prefers {GONE if i % 2 else KEPT} number {i}.",
            vector(),
            {"user_id": "u" if i % 2 else "k", "kind": "preference", "status": "candidate"},
            said=[vector(), vector()],
        )
        for i in range(n)
    ]


def holding(root, word: str) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and word.encode() in p.read_bytes())


def searches(index, pts: list[IndexPoint]) -> list:
    """What the kept user's points answer: dense, the best text hit (BM25's IDF counts every
    point: the rest of the ranking moves as points go) and the own and message-vector scores."""
    scope = Scope("k")
    dense = [h.memory_id for h in index.search_dense(pts[0].vector, scope, 5)]
    text = [h.memory_id for h in index.search_text("number 4", scope, 1)]
    own, said = index.candidate_scores(pts[2].vector, scope, ["m0", "m2", "m4"])
    return [dense, text, {k: round(v, 5) for k, v in own.items()}, {k: round(v, 5) for k, v in said.items()}]


@pytest.mark.parametrize("backend", ["edge", "local"])
def test_erased_points_leave_no_byte_and_the_rest_search_as_before(tmp_path, backend):
    root = tmp_path / backend
    index = EdgeIndex(root, DIM) if backend == "edge" else QdrantClientIndex.local(root, collection="m", dim=DIM)
    pts = points()
    index.upsert(pts)
    index.delete(["m1"])  # a plain delete leaves the text in the files
    if backend == "edge":
        index.flush()
    assert holding(root, GONE) and holding(root, KEPT)
    before = searches(index, pts)

    kept = index.erase([p.memory_id for p in pts if p.payload["user_id"] == "u"])
    assert (kept, index.count(), index.keeps_files) == (20, 20, True)
    assert searches(index, pts) == before
    assert holding(root, GONE) == [] and holding(root, KEPT)
    index.close()
    reopened = EdgeIndex(root, DIM) if backend == "edge" else QdrantClientIndex.local(root, collection="m", dim=DIM)
    assert reopened.all_ids() == {f"m{i}" for i in range(0, 40, 2)} and searches(reopened, pts) == before
    reopened.close()


def test_edge_keeps_its_folder_lock_and_replaces_a_rewrite_cut_short(tmp_path):
    root = tmp_path / "index"
    left = tmp_path / f"index{REWRITE_SUFFIX}"
    left.mkdir()
    (left / "stale").write_text(KEPT)  # what a rewrite a crash cut short left
    index = EdgeIndex(root, DIM)
    index.upsert(points(4))
    assert index.erase(["m1"]) == 3
    assert not left.exists()
    with pytest.raises(IndexInUse):
        EdgeIndex(root, DIM)
    index.upsert(points(6)[4:])  # still written to
    assert index.count() == 5
    index.close()


def test_a_server_only_deletes(tmp_path):
    index = QdrantClientIndex(QdrantClient(":memory:"), collection="m", dim=DIM)
    index.upsert(points(4))
    assert (index.keeps_files, index.erase(["m1", "m3"]), index.all_ids()) == (False, None, {"m0", "m2"})
    index.close()
