"""An embedded index taken in turns: one holder at a time, the next one waits, sees what the
first wrote, and gives up with a retryable error when the wait is too long."""

from __future__ import annotations

import threading

import pytest

from dreamer.core.errors import IndexInUse, Retryable
from dreamer.core.scope import Scope
from dreamer.engine.shared_index import IndexBusy, TimeSharedIndex, build_shared_index, end_turn, open_shared_runtime
from dreamer.index.contract import IndexPoint
from dreamer.index.edge import EdgeIndex


def shared(tmp_path, wait: float = 5.0) -> TimeSharedIndex:
    return TimeSharedIndex(lambda: EdgeIndex(tmp_path / "index", 8), tmp_path / "index.turn", dim=8, wait_seconds=wait)


def point(memory_id: str, text: str) -> IndexPoint:
    return IndexPoint(
        memory_id, text, None, {"user_id": "alice", "text": text, "status": "candidate", "kind": "preference"}
    )


def test_the_index_is_opened_on_first_use_and_given_back_at_release(tmp_path):
    a, b = shared(tmp_path), shared(tmp_path, wait=0.2)
    assert not a.held
    a.upsert([point("m1", "The user prefers green tea.")])
    assert a.held
    with pytest.raises(IndexBusy) as caught:
        b.search_text("tea", Scope("alice"), 5)
    assert isinstance(caught.value, Retryable) and isinstance(caught.value, IndexInUse)

    a.release()

    assert [h.memory_id for h in b.search_text("tea", Scope("alice"), 5)] == ["m1"]
    b.release()
    a.release()  # a second release is harmless


def test_a_waiting_process_gets_its_turn_when_the_holder_releases(tmp_path):
    a, b = shared(tmp_path), shared(tmp_path, wait=10)
    a.upsert([point("m1", "The user prefers jazz.")])
    timer = threading.Timer(0.3, a.release)
    timer.start()
    try:
        assert b.count() == 1
    finally:
        timer.join()
        b.release()


def test_a_process_outside_the_turns_holding_the_folder_is_waited_for(tmp_path):
    outsider = EdgeIndex(tmp_path / "index", 8)  # e.g. a CLI command that opened the folder directly
    b = shared(tmp_path, wait=0.3)
    with pytest.raises(IndexBusy, match="in use"):
        b.count()
    outsider.close()
    assert b.count() == 0
    b.release()


def test_without_a_server_the_index_is_taken_in_turns(settings):
    local = build_shared_index(settings, 8)
    assert isinstance(local, TimeSharedIndex) and not local.held
    assert local.turn_file == settings.data_dir / "index.turn"


def test_end_turn_releases_the_runtimes_index(settings, sqlite_engine):
    with open_shared_runtime(settings, engine=sqlite_engine, embedder=None, llm=None) as rt:
        rt.index.upsert([point("m1", "The user prefers tea.")])
        assert rt.index.held
        end_turn(rt)
        assert not rt.index.held
        assert rt.index.count() == 1
    assert not rt._index.held  # closed with the runtime
