"""The search index on real Qdrant Edge and real qdrant-client local mode."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dreamer.core.errors import ConfigError, IndexInUse, ScopeRequired
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.index.build import build_index
from dreamer.index.contract import Hit, IndexPoint, MemoryIndex, SearchFilter, point_id
from dreamer.index.edge import EdgeIndex, disk_flush_due
from dreamer.index.points import floats
from dreamer.index.query import hit_fields
from dreamer.index.server import QdrantClientIndex

DIM = 4
BACKENDS = ["edge", "local"]


def test_floats_gives_python_floats_from_lists_and_arrays():
    import numpy as np

    for vector in ([1, 0.5], (1, 0.5), np.array([1, 0.5], dtype=np.float32), np.array([1, 0.5]), np.array([1, 0])):
        out = floats(vector)
        assert out == [float(v) for v in vector] and [type(x) for x in out] == [float, float]


def _open(backend: str, root: Path, dim: int = DIM) -> MemoryIndex:
    if backend == "edge":
        return EdgeIndex(root / "edge", dim)
    return QdrantClientIndex.local(root / "local", collection="memories", dim=dim)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def opener(backend, tmp_path):
    """Opens the backend's index in a fixed folder (so it can be reopened); closes all after."""
    opened: list[MemoryIndex] = []

    def open_index(dim: int = DIM) -> MemoryIndex:
        index = _open(backend, tmp_path, dim)
        opened.append(index)
        return index

    yield open_index
    for index in opened:
        index.close()


@pytest.fixture
def index(opener) -> MemoryIndex:
    return opener()


def mem(
    memory_id: str,
    text: str = "",
    vector: list[float] | None = None,
    *,
    user: str = "alice",
    agent: str | None = None,
    project: str | None = None,
    team: str | None = None,
    kind: str = "preference",
    status: str = "verified",
    created_at: float = 1_000.0,
) -> IndexPoint:
    payload = {
        "user_id": user,
        "agent_id": agent,
        "project": project,
        "team": team,
        "kind": kind,
        "status": status,
        "created_at": created_at,
        "importance": 0.5,
    }
    return IndexPoint(memory_id, text or f"memory {memory_id}", vector, payload)


def ids(hits: list[Hit]) -> list[str]:
    return [h.memory_id for h in hits]


ALICE = Scope("alice")


# --- writes ----------------------------------------------------------------------------------


def test_point_id_is_deterministic_uuid():
    assert point_id("m1") == point_id("m1")
    assert point_id("m1") != point_id("m2")
    assert len(point_id("m1")) == 36


def test_upsert_is_idempotent(index):
    index.upsert([mem("m1", "green tea", [1, 0, 0, 0])])
    index.upsert([mem("m1", "green tea", [1, 0, 0, 0])])
    assert index.count() == 1
    index.upsert([mem("m1", "black coffee", [0, 1, 0, 0])])
    assert index.count() == 1
    (hit,) = index.search_dense([0, 1, 0, 0], ALICE, 5)
    assert hit.memory_id == "m1"
    assert hit.payload["text"] == "black coffee"
    assert hit.payload["memory_id"] == "m1"
    assert hit.payload["kind"] == "preference"
    assert index.search_text("tea", ALICE, 5) == []
    assert ids(index.search_text("coffee", ALICE, 5)) == ["m1"]


def test_upsert_many_in_batches(index):
    points = [mem(f"m{i}", f"note number {i}", [1, i / 1000, 0, 0]) for i in range(1_100)]
    index.upsert(points)
    assert index.count() == 1_100
    assert index.all_ids() == {f"m{i}" for i in range(1_100)}


def test_delete(index):
    index.upsert([mem(m, vector=[1, 0, 0, 0]) for m in ("m1", "m2", "m3")])
    index.delete(["m2", "never-indexed"])
    assert index.count() == 2
    assert index.all_ids() == {"m1", "m3"}
    assert set(ids(index.search_dense([1, 0, 0, 0], ALICE, 10))) == {"m1", "m3"}
    index.delete([])
    assert index.count() == 2


def test_point_without_user_is_refused(index):
    from dreamer.core.errors import IndexFailure

    bad = IndexPoint("m1", "text", None, {"kind": "preference"})
    with pytest.raises(IndexFailure, match="user_id"):
        index.upsert([bad])
    assert index.count() == 0


def test_wrong_vector_length_is_refused(index):
    with pytest.raises(ConfigError, match="dimensions"):
        index.upsert([mem("m1", vector=[1, 0, 0])])
    with pytest.raises(ConfigError, match="dimensions"):
        index.search_dense([1, 0, 0], ALICE, 5)


# --- dense and text search ----------------------------------------------------------------------


def test_dense_search_ranks_nearest_first(index):
    index.upsert(
        [
            mem("far", vector=[0, 0, 0, 1]),
            mem("near", vector=[0.9, 0.1, 0, 0]),
            mem("exact", vector=[2, 0, 0, 0]),
            mem("mid", vector=[0.5, 0.5, 0, 0]),
            mem("opposite", vector=[-1, 0, 0, 0]),
        ]
    )
    hits = index.search_dense([1, 0, 0, 0], ALICE, 10)
    assert ids(hits) == ["exact", "near", "mid", "far", "opposite"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[-1].score == pytest.approx(-1.0, abs=1e-5)
    assert ids(index.search_dense([1, 0, 0, 0], ALICE, 2)) == ["exact", "near"]


def test_dense_search_many_answers_each_vector_as_one_search_would(index):
    index.upsert(
        [
            mem("x", vector=[1, 0, 0, 0]),
            mem("y", vector=[0, 1, 0, 0]),
            mem("xy", vector=[1, 1, 0, 0]),
            mem("bob-x", vector=[1, 0, 0, 0], user="bob"),
        ]
    )
    queries = [[1, 0, 0, 0], [0, 1, 0, 0], [0.2, 1, 0, 0]]
    many = index.search_dense_many(queries, ALICE, 2, SearchFilter(payload_fields=("kind",)))
    assert [ids(hits) for hits in many] == [["x", "xy"], ["y", "xy"], ["y", "xy"]]
    assert [ids(hits) for hits in many] == [ids(index.search_dense(q, ALICE, 2)) for q in queries]
    assert [sorted(h.payload) for h in many[0]] == [["kind", "memory_id"], ["kind", "memory_id"]]
    assert index.search_dense_many([], ALICE, 2) == []
    assert index.search_dense_many(queries, ALICE, 0) == [[], [], []]


def test_text_search_finds_a_rare_word(index):
    index.upsert(
        [
            mem("k8s", "we deploy every service on kubernetes", [1, 0, 0, 0]),
            mem("tea", "the user drinks green tea every morning", [0, 1, 0, 0]),
            mem("ci", "deploy notes for the release pipeline", [0, 0, 1, 0]),
        ]
    )
    hits = index.search_text("kubernetes", ALICE, 10)
    assert ids(hits) == ["k8s"]
    assert hits[0].score > 0
    assert hits[0].payload["text"] == "we deploy every service on kubernetes"
    assert index.search_text("zeppelin", ALICE, 10) == []
    assert index.search_text("the and of", ALICE, 10) == []  # stopwords only


def test_text_search_stems_english(index):
    index.upsert(
        [
            mem("m1", "the nightly job runs the migrations"),
            mem("m2", "coffee with oat milk"),
        ]
    )
    assert ids(index.search_text("running migration", ALICE, 10)) == ["m1"]


def test_text_search_ranks_by_bm25(index):
    index.upsert(
        [
            mem("tf3", "python python python"),
            mem("tf1", "python scripts clean the exported data tables"),
            mem("none", "rust borrow checker"),
        ]
    )
    assert ids(index.search_text("python", ALICE, 10)) == ["tf3", "tf1"]


def test_text_search_weights_rare_terms_by_idf(index):
    index.upsert(
        [
            mem("tea1", "tea morning"),
            mem("tea2", "tea lunch"),
            mem("tea3", "tea evening"),
            mem("k8s", "kubernetes cluster"),
        ]
    )
    hits = index.search_text("kubernetes tea", ALICE, 10)
    assert ids(hits)[0] == "k8s"
    assert set(ids(hits)[1:]) == {"tea1", "tea2", "tea3"}
    assert hits[0].score > hits[1].score


def test_sparse_only_points_are_found_by_text(index):
    index.upsert(
        [
            mem("sparse", "postgres vacuum tuning notes", None),
            mem("dense", "redis eviction policy", [1, 0, 0, 0]),
        ]
    )
    assert index.count() == 2
    assert ids(index.search_text("vacuum", ALICE, 10)) == ["sparse"]
    assert ids(index.search_dense([1, 0, 0, 0], ALICE, 10)) == ["dense"]
    assert index.all_ids() == {"sparse", "dense"}


# --- scope ---------------------------------------------------------------------------------------


@pytest.fixture
def scoped(index) -> MemoryIndex:
    text = "shared words about kubernetes"
    vec = [1, 0, 0, 0]
    index.upsert(
        [
            mem("a1", text, vec, agent="x", project="p"),
            mem("a2", text, vec, agent="y", project="p"),
            mem("a3", text, vec, agent="x", project="q", team="t"),
            mem("a4", text, vec),
            mem("b1", text, vec, user="bob", agent="x", project="p", team="t"),
        ]
    )
    return index


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (Scope("alice"), {"a1", "a2", "a3", "a4"}),
        (Scope("bob"), {"b1"}),
        (Scope("carol"), set()),
        (Scope("alice", agent_id="x"), {"a1", "a3"}),
        (Scope("alice", project="p"), {"a1", "a2"}),
        (Scope("alice", agent_id="x", project="q"), {"a3"}),
        (Scope("alice", team="t"), {"a3"}),
        (Scope("bob", agent_id="y"), set()),
    ],
)
def test_scope_filter_isolates(scoped, scope, expected):
    assert set(ids(scoped.search_dense([1, 0, 0, 0], scope, 10))) == expected
    assert set(ids(scoped.search_text("kubernetes", scope, 10))) == expected


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        (Scope("alice"), {"a4"}),
        (Scope("bob"), set()),
        (Scope("alice", agent_id="x"), set()),
        (Scope("alice", agent_id="x", project="p"), {"a1"}),
        (Scope("alice", agent_id="x", project="q", team="t"), {"a3"}),
        (Scope("bob", agent_id="x", project="p", team="t"), {"b1"}),
    ],
)
def test_exact_scope_keeps_only_what_the_scope_owns(scoped, scope, expected):
    flt = SearchFilter(exact_scope=True)
    assert set(ids(scoped.search_dense([1, 0, 0, 0], scope, 10, flt))) == expected
    assert set(ids(scoped.search_text("kubernetes", scope, 10, flt))) == expected


def test_user_a_never_sees_user_b(scoped):
    for hits in (
        scoped.search_dense([1, 0, 0, 0], Scope("alice"), 100),
        scoped.search_text("shared words kubernetes", Scope("alice"), 100),
    ):
        assert hits
        assert all(h.payload["user_id"] == "alice" for h in hits)
        assert "b1" not in ids(hits)


def test_search_without_scope_is_refused(index):
    index.upsert([mem("m1", "kubernetes", [1, 0, 0, 0])])
    with pytest.raises(ScopeRequired):
        Scope("")
    with pytest.raises(ScopeRequired):
        Scope("   ")
    with pytest.raises(ScopeRequired):
        index.search_dense([1, 0, 0, 0], None, 5)
    with pytest.raises(ScopeRequired):
        index.search_text("kubernetes", None, 5)
    with pytest.raises(ScopeRequired):
        index.search_text("", None, 5)


# --- search filter -------------------------------------------------------------------------------


@pytest.fixture
def filtered(index) -> MemoryIndex:
    text = "a memory about kubernetes"
    vec = [1, 0, 0, 0]
    index.upsert(
        [
            mem("pref", text, vec, kind="preference", status="verified", created_at=100.0),
            mem("prof", text, vec, kind="profile", status="candidate", created_at=200.0),
            mem("lesson", text, vec, kind="lesson", status="review_required", created_at=300.0),
            mem("old", text, vec, kind="preference", status="superseded", created_at=400.0),
            mem("gone", text, vec, kind="profile", status="forgotten", created_at=500.0),
        ]
    )
    return index


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (None, {"pref", "prof", "lesson", "old", "gone"}),
        (SearchFilter(), {"pref", "prof", "lesson"}),
        (SearchFilter(statuses=None), {"pref", "prof", "lesson", "old", "gone"}),
        (SearchFilter(statuses=["superseded", "forgotten"]), {"old", "gone"}),
        (SearchFilter(kinds=["preference"]), {"pref"}),
        (
            SearchFilter(kinds=["preference", "profile"], statuses=None),
            {"pref", "prof", "old", "gone"},
        ),
        (SearchFilter(kinds=[]), set()),
        (SearchFilter(statuses=[]), set()),
        (SearchFilter(since=200.0), {"prof", "lesson"}),
        (SearchFilter(until=300.0), {"pref", "prof"}),
        (SearchFilter(since=150.0, until=450.0, statuses=None), {"prof", "lesson", "old"}),
        (SearchFilter(kinds=["lesson"], since=301.0), set()),
    ],
)
def test_search_filter(filtered, flt, expected):
    assert set(ids(filtered.search_dense([1, 0, 0, 0], ALICE, 10, flt))) == expected
    assert set(ids(filtered.search_text("kubernetes", ALICE, 10, flt))) == expected


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (None, None),
        (SearchFilter(), None),
        (SearchFilter(payload_fields=()), ["memory_id"]),
        (SearchFilter(payload_fields=["speakers", "memory_id", "kind"]), ["memory_id", "speakers", "kind"]),
    ],
)
def test_hit_fields(flt, expected):
    assert hit_fields(flt) == expected


def test_hits_carry_only_the_payload_fields_asked_for(index):
    index.upsert([mem("m1", "kubernetes", [1, 0, 0, 0])])
    flt = SearchFilter(payload_fields=["kind"])
    for hits in (index.search_dense([1, 0, 0, 0], ALICE, 5, flt), index.search_text("kubernetes", ALICE, 5, flt)):
        assert [(h.memory_id, h.payload) for h in hits] == [("m1", {"memory_id": "m1", "kind": "preference"})]
    (whole,) = index.search_text("kubernetes", ALICE, 5)
    assert set(whole.payload) == {
        "memory_id",
        "text",
        "user_id",
        "agent_id",
        "project",
        "team",
        "kind",
        "status",
        "created_at",
        "importance",
    }


def test_filter_combines_with_scope(filtered):
    filtered.upsert([mem("bob-pref", "kubernetes", [1, 0, 0, 0], user="bob")])
    flt = SearchFilter(kinds=["preference"])
    assert ids(filtered.search_dense([1, 0, 0, 0], Scope("bob"), 10, flt)) == ["bob-pref"]
    assert ids(filtered.search_text("kubernetes", ALICE, 10, flt)) == ["pref"]


# --- admin -----------------------------------------------------------------------------------


def said(point: IndexPoint, *vectors: list[float]) -> IndexPoint:
    point.said = [list(v) for v in vectors]
    return point


def test_candidate_scores_give_own_and_message_similarity_of_the_ids_asked(index):
    index.upsert(
        [
            said(mem("a", "about a", [1, 0, 0, 0]), [0, 1, 0, 0], [0, 0, 1, 0]),  # rests on two messages
            mem("b", "about b", [0, 1, 0, 0]),  # no message vectors
            said(mem("c", "about c", [0, 0, 0, 1]), [1, 0, 0, 0]),
            said(mem("d", "bob's", [0, 0.6, 0.8, 0], user="bob"), [0, 0.6, 0.8, 0]),
            mem("s", "sparse only", None),
        ]
    )
    own, by_message = index.candidate_scores([0, 0.6, 0.8, 0], ALICE, ["a", "b", "c", "d", "s"])
    assert {k: round(v, 4) for k, v in own.items()} == {"a": 0.0, "b": 0.6, "c": 0.0}  # bob's is out of scope
    assert {k: round(v, 4) for k, v in by_message.items()} == {"a": 0.8, "c": 0.0}  # the nearest of a's two
    assert index.candidate_scores([0, 0.6, 0.8, 0], ALICE, []) == ({}, {})
    assert index.candidate_scores([1, 0, 0, 0], ALICE, ["a"], SearchFilter(statuses=["archived"])) == ({}, {})


def test_a_message_vector_of_the_wrong_length_is_refused(index):
    with pytest.raises(ConfigError, match="message vector of memory m1 has 3 dimensions"):
        index.upsert([said(mem("m1", "x", [1, 0, 0, 0]), [1, 0, 0])])
    assert index.count() == 0


def test_an_edge_index_built_before_message_vectors_opens_without_them_until_cleared(tmp_path):
    import qdrant_edge as qe

    from dreamer.index.edge_shard import edge_config

    qe.EdgeShard.create(str(tmp_path / "edge"), edge_config(DIM, said=False)).close()
    used_without_message_vectors_until_cleared(EdgeIndex(tmp_path / "edge", DIM))


def test_a_collection_built_before_message_vectors_is_used_without_them_until_cleared(tmp_path):
    from qdrant_client import QdrantClient, models

    client = QdrantClient(path=str(tmp_path / "local"))
    client.create_collection(
        "memories",
        vectors_config={"dense": models.VectorParams(size=DIM, distance=models.Distance.COSINE)},
        sparse_vectors_config={"bm25": models.SparseVectorParams(modifier=models.Modifier.IDF)},
    )
    used_without_message_vectors_until_cleared(QdrantClientIndex(client, collection="memories", dim=DIM))


def used_without_message_vectors_until_cleared(index: MemoryIndex) -> None:
    try:
        assert index.said is False
        index.upsert([said(mem("a", "x", [1, 0, 0, 0]), [0, 1, 0, 0])])  # its message vectors are left out
        assert index.candidate_scores([0, 1, 0, 0], ALICE, ["a"]) == ({"a": 0.0}, {})
        index.clear()  # what `dreamer reindex` does first
        assert index.said is True
        index.upsert([said(mem("a", "x", [1, 0, 0, 0]), [0, 1, 0, 0])])
        assert index.candidate_scores([0, 1, 0, 0], ALICE, ["a"]) == ({"a": 0.0}, {"a": 1.0})
    finally:
        index.close()


def test_all_ids_count_clear(index):
    assert index.count() == 0
    assert index.all_ids() == set()
    index.upsert([mem(f"m{i}", f"text {i}", [1, 0, 0, i]) for i in range(5)])
    index.upsert([mem("s1", "sparse only", None, user="bob")])
    assert index.count() == 6
    assert index.all_ids() == {"m0", "m1", "m2", "m3", "m4", "s1"}
    index.clear()
    assert index.count() == 0
    assert index.all_ids() == set()
    assert index.search_dense([1, 0, 0, 0], ALICE, 10) == []
    index.upsert([mem("again", "kubernetes", [1, 0, 0, 0])])
    assert index.all_ids() == {"again"}
    assert ids(index.search_text("kubernetes", ALICE, 10)) == ["again"]


def test_reopen_keeps_points(opener):
    first = opener()
    first.upsert([mem("m1", "kubernetes pods", [1, 0, 0, 0]), mem("m2", "tea", None)])
    first.delete(["m2"])
    first.upsert([mem("m3", "coffee", [0, 1, 0, 0])])
    first.close()
    second = opener()
    assert second.count() == 2
    assert second.all_ids() == {"m1", "m3"}
    assert ids(second.search_dense([1, 0, 0, 0], ALICE, 1)) == ["m1"]
    assert ids(second.search_text("pods", ALICE, 5)) == ["m1"]


def test_dimension_mismatch_on_reopen(opener):
    opener(4).close()
    with pytest.raises(ConfigError, match=r"4-dimensional.*8"):
        opener(8)
    same = opener(4)
    assert same.count() == 0


@pytest.mark.parametrize(
    ("unflushed", "since_flush", "every_seconds", "due"),
    [(0, 99.0, 5.0, False), (0, 0.0, 0.0, False), (3, 0.0, 0.0, True), (3, 4.9, 5.0, False), (3, 5.0, 5.0, True)],
)
def test_flush_due(unflushed, since_flush, every_seconds, due):
    assert disk_flush_due(unflushed, since_flush, every_seconds) is due


def test_edge_flushes_only_what_changed(tmp_path):
    with EdgeIndex(tmp_path / "edge", DIM, flush_seconds=3600) as index:
        assert index.flush() is False
        index.upsert([mem("m1", "kubernetes", [1, 0, 0, 0]), mem("m2", "tea", None)])
        index.delete(["m2"])
        assert index.flush() is True
        assert index.flush() is False
    with EdgeIndex(tmp_path / "edge", DIM, flush_seconds=0) as index:
        index.upsert([mem("m3", "coffee", [0, 1, 0, 0])])
        assert index.flush() is False
        assert index.all_ids() == {"m1", "m3"}


def test_close_is_idempotent(opener):
    index = opener()
    index.close()
    index.close()


# --- ownership across processes ---------------------------------------------------------------

HOLDER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from dreamer.index.edge import EdgeIndex
    from dreamer.index.server import QdrantClientIndex
    backend, root = sys.argv[1], Path(sys.argv[2])
    if backend == "edge":
        index = EdgeIndex(root / "edge", 4)
    elif backend == "raw-edge":
        import qdrant_edge as qe
        index = qe.EdgeShard.load(str(root / "edge"))
    else:
        index = QdrantClientIndex.local(root / "local", collection="memories", dim=4)
    print("ready", flush=True)
    sys.stdin.readline()
    index.close()
    """
)


def _holder(backend: str, root: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, backend, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    line = proc.stdout.readline()
    assert line.strip() == "ready", f"holder failed to start: {line!r}"
    return proc


def _release(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()
    assert proc.wait(timeout=30) == 0


def test_index_in_use_by_another_process(backend, tmp_path):
    _open(backend, tmp_path).close()
    proc = _holder(backend, tmp_path)
    try:
        with pytest.raises(IndexInUse, match="in use by another process"):
            _open(backend, tmp_path)
    finally:
        _release(proc)
    index = _open(backend, tmp_path)
    assert index.count() == 0
    index.close()


def test_index_in_use_within_one_process(backend, tmp_path):
    first = _open(backend, tmp_path)
    try:
        with pytest.raises(IndexInUse):
            _open(backend, tmp_path)
    finally:
        first.close()


def test_edge_own_lock_is_reported_as_in_use(tmp_path):
    """A process holding the shard through Qdrant Edge directly (no .lock) is detected too."""
    EdgeIndex(tmp_path / "edge", DIM).close()
    proc = _holder("raw-edge", tmp_path)
    try:
        with pytest.raises(IndexInUse, match="in use by another process"):
            EdgeIndex(tmp_path / "edge", DIM)
    finally:
        _release(proc)


WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from dreamer.index.contract import IndexPoint
    from dreamer.index.edge import EdgeIndex
    index = EdgeIndex(Path(sys.argv[1]), 4, flush_seconds=3600)
    payload = {"user_id": "alice", "kind": "preference", "status": "verified", "created_at": 1.0}
    index.upsert([IndexPoint(f"m{i}", f"kubernetes note {i}", [1.0, 0.0, 0.0, float(i)], payload)
                  for i in range(50)])
    print("acknowledged", flush=True)
    time.sleep(60)
    """
)


def test_edge_acknowledged_points_survive_a_kill(tmp_path):
    """Acknowledged but not yet flushed: the write-ahead log brings them back."""
    path = tmp_path / "edge"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "acknowledged"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    with EdgeIndex(path, DIM) as index:
        assert index.count() == 50
        assert len(index.search_text("kubernetes", ALICE, 100)) == 50


# --- Edge specifics and factory ---------------------------------------------------------------


def test_edge_optimize_keeps_results(tmp_path):
    with EdgeIndex(tmp_path / "edge", DIM, optimize_after=100) as index:
        index.upsert([mem(f"m{i}", f"note {i}", [1, i / 100, 0, 0]) for i in range(150)])
        assert index.count() == 150
        assert index.optimize() in (True, False)
        assert ids(index.search_dense([1, 0, 0, 0], ALICE, 1)) == ["m0"]


def test_build_index_edge_by_default(tmp_path):
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    index = build_index(settings, DIM)
    try:
        assert isinstance(index, EdgeIndex)
        assert index.path == settings.index_dir
        assert (settings.index_dir / ".lock").exists()
    finally:
        index.close()


def test_build_index_with_client(tmp_path):
    from qdrant_client import QdrantClient

    settings = Settings(_env_file=None, data_dir=tmp_path / "data", qdrant_collection="mine")
    index = build_index(settings, DIM, client=QdrantClient(path=str(tmp_path / "local")))
    try:
        assert isinstance(index, QdrantClientIndex)
        assert index.collection == "mine"
        assert index.client.collection_exists("mine")
    finally:
        index.close()


def test_build_index_server_url_gives_client_index(tmp_path, monkeypatch):
    """A qdrant_url selects the client backend with its URL and key (local mode stands in)."""
    import qdrant_client

    real = qdrant_client.QdrantClient
    seen: dict = {}

    def fake_client(**kwargs):
        seen.update(kwargs)
        return real(path=str(tmp_path / "local"))

    monkeypatch.setattr(qdrant_client, "QdrantClient", fake_client)
    settings = Settings(
        _env_file=None,
        data_dir=tmp_path / "data",
        qdrant_url="http://qdrant.example:6333",
        qdrant_api_key="secret",
    )
    index = build_index(settings, DIM)
    try:
        assert isinstance(index, QdrantClientIndex)
        assert seen == {"url": "http://qdrant.example:6333", "api_key": "secret"}
        assert index.collection == "dreamer_memories"
        assert not (settings.index_dir / ".lock").exists()
    finally:
        index.close()
