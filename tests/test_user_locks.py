"""One consolidation of a user at a time: two passes over sessions of one user at once add
one memory, a held lock is waited for and then given up with a retryable error, and with an
index taken in turns no lock is taken (the turn serialises, a lock could deadlock with it)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from sqlmodel import select

from dreamer import leases
from dreamer.db import session_scope
from dreamer.dream import dream_pass
from dreamer.errors import Retryable
from dreamer.ingest.store import record_messages
from dreamer.models import Cursor, DreamRun, Lease, Memory, MemoryEvent
from dreamer.scripted import ScriptedServer
from dreamer.shared_index import end_turn, open_shared_runtime
from dreamer.user_locks import LeaseLocks, ProcessLocks, Unlocked, UserLocked, lock_name
from dreamkit import ManualClock, extraction_script, make_index, make_runtime

ELSEWHERE = "another worker"


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        srv.set_script(extraction_script())
        yield srv


def holder(engine, name: str) -> str | None:
    with session_scope(engine) as s:
        row = s.get(Lease, name)
        return row.owner if row is not None else None


def session_with(*user_lines: str) -> list[dict]:
    texts = [t for line in user_lines for t in (line, "noted")] + ["ok", "fine"]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]


def memories(engine, user_id: str = "alice") -> list[Memory]:
    with session_scope(engine) as s:
        return list(s.exec(select(Memory).where(Memory.user_id == user_id)).all())


def events(engine) -> Counter:
    with session_scope(engine) as s:
        return Counter(e.event for e in s.exec(select(MemoryEvent)).all())


# --------------------------------------------------------------------------- waiting for the lock


def test_a_held_lock_is_waited_for_then_given_up_with_a_retryable_error_naming_the_user(engine):
    clock, slept = ManualClock(), []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=2, poll_seconds=0.5, clock=clock, sleep=sleep)
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)

    with pytest.raises(UserLocked) as caught:
        with locks.hold("alice"):
            pytest.fail("the block ran while another writer held the lock")

    assert str(caught.value) == "user 'alice': another writer kept consolidating their memories; gave up after 2 s"
    assert isinstance(caught.value, Retryable) and caught.value.delay == 5.0
    assert slept == [0.5, 0.5, 0.5, 0.5]
    assert holder(engine, lock_name("alice")) == ELSEWHERE


def test_the_lock_is_taken_once_its_holder_lets_go_and_given_back_after_the_block(engine):
    slept = []

    def sleep(seconds: float) -> None:  # the other writer finishes while this one waits
        slept.append(seconds)
        leases.release(engine, lock_name("alice"), ELSEWHERE)

    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=2, poll_seconds=0.5, clock=ManualClock(), sleep=sleep)
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)

    with locks.hold("alice"):
        assert holder(engine, lock_name("alice")) not in (None, ELSEWHERE)
        with locks.hold("bob"):  # another user's lock is another row
            assert holder(engine, lock_name("bob")) not in (None, holder(engine, lock_name("alice")))
    with pytest.raises(ValueError):
        with locks.hold("alice"):
            raise ValueError("the block failed")

    assert slept == [0.5]
    assert (holder(engine, lock_name("alice")), holder(engine, lock_name("bob"))) == (None, None)


def test_a_user_id_of_255_characters_has_a_lock_of_its_own(engine):
    longest, other = "x" * 255, "x" * 254 + "y"
    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=0, clock=ManualClock(), sleep=lambda s: None)
    with locks.hold(longest), locks.hold(other):
        assert len(lock_name(longest)) == len("consolidate:") + 64
        assert None not in (holder(engine, lock_name(longest)), holder(engine, lock_name(other)))


# --------------------------------------------------------------------------- the race it closes


class Rendezvous:
    """One index shared by two runtimes (a Qdrant server stand-in): its calls one at a time
    (qdrant-client local mode is not made for threads), and a neighbour search held until the
    other writer has searched too, or waits for the user's lock. Without the lock both writers
    plan before either applies, every time."""

    def __init__(self, inner) -> None:
        self.inner, self.dim = inner, inner.dim
        self._calls = threading.Lock()
        self._met = threading.Condition()
        self.searches = 0
        self.lock_waits = 0

    def lock_sleep(self, seconds: float) -> None:
        """The `sleep` of the writers' locks: one of them waits for the lock."""
        with self._met:
            self.lock_waits += 1
            self._met.notify_all()
        time.sleep(seconds)

    def search_dense_many(self, *args):
        with self._met:
            self.searches += 1
            self._met.notify_all()
            if not self._met.wait_for(lambda: self.searches >= 2 or self.lock_waits, timeout=60):
                raise RuntimeError("the other writer neither searched nor waited for the lock")
        return self._call("search_dense_many", *args)

    def _call(self, name: str, *args):
        with self._calls:
            return getattr(self.inner, name)(*args)

    def upsert(self, points):
        return self._call("upsert", points)

    def delete(self, memory_ids):
        return self._call("delete", memory_ids)

    def search_dense(self, *args):
        return self._call("search_dense", *args)

    def search_text(self, *args):
        return self._call("search_text", *args)

    def all_ids(self):
        return self._call("all_ids")

    def payloads(self, fields):
        return self._call("payloads", fields)

    def count(self):
        return self._call("count")

    def clear(self):
        return self._call("clear")

    def close(self):
        return self._call("close")


LOCKS = {
    "lease": lambda engine, sleep: LeaseLocks(engine, ttl_seconds=600, wait_seconds=60, poll_seconds=0.01, sleep=sleep),
    "process": lambda engine, sleep: ProcessLocks(wait_seconds=60, poll_seconds=0.01, sleep=sleep),
}


@pytest.mark.parametrize("kind", list(LOCKS))
def test_two_passes_over_sessions_of_one_user_at_once_add_one_memory(settings, engine, server, tmp_path, kind):
    index = Rendezvous(make_index("qdrant-client", tmp_path))
    ids = [record_messages(engine, f"s{n}", session_with("I prefer green tea in the morning."), user_id="alice").session_id
           for n in (1, 2)]
    runtimes = [make_runtime(settings, engine, server, index, user_locks=LOCKS[kind](engine, index.lock_sleep)) for _ in ids]
    runs, errors = [], []

    def dream(rt, session_id: int) -> None:
        try:
            runs.append(dream_pass(rt, session_ids=[session_id]))
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=dream, args=pair) for pair in zip(runtimes, ids)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        count = index.count()
    finally:
        index.close()

    assert errors == []
    assert events(engine) == Counter({"add": 1, "merge": 1})
    [m] = memories(engine)
    assert (m.text, m.status) == ("The user prefers green tea in the morning.", "verified")
    assert sorted((r.status, r.sessions, r.added, r.merged) for r in runs) == [("ok", 1, 0, 1), ("ok", 1, 1, 0)]
    assert count == 1 and index.lock_waits > 0
    assert holder(engine, lock_name("alice")) is None


# --------------------------------------------------------------------------- which runtimes lock


def test_with_the_index_taken_in_turns_a_pass_takes_no_user_lock(settings, engine):
    """A lock held elsewhere (as by a process waiting for the turn this pass holds) is not
    waited for: the turn already serialises consolidation."""
    session_id = record_messages(engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice").session_id
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)
    quick = settings.model_copy(update={"user_lock_wait_seconds": 0})
    with open_shared_runtime(quick, engine=engine, embedder=None, llm=None) as rt:
        assert isinstance(rt.user_locks, Unlocked)
        try:
            run = dream_pass(rt, session_ids=[session_id])
        finally:
            end_turn(rt)

    assert (run.status, run.sessions, run.added) == ("ok", 1, 1)
    assert holder(engine, lock_name("alice")) == ELSEWHERE


def test_with_a_qdrant_server_a_pass_waits_for_the_users_lease(settings, engine, server, tmp_path):
    session_id = record_messages(engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice").session_id
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)
    quick = settings.model_copy(update={"user_lock_wait_seconds": 0, "qdrant_url": "http://127.0.0.1:1"})  # index handed in
    index = make_index("edge", tmp_path)
    rt = make_runtime(quick, engine, server, index)
    try:
        assert isinstance(rt.user_locks, LeaseLocks)
        with pytest.raises(UserLocked, match="^user 'alice': another writer kept consolidating their memories"):
            dream_pass(rt, session_ids=[session_id])
    finally:
        rt.close()
        index.close()

    with session_scope(engine) as s:
        run = s.exec(select(DreamRun)).one()
        assert (run.status, s.get(Cursor, session_id).processed_seq) == ("failed", 0)
    assert memories(engine) == []


def test_with_the_embedded_index_a_runtime_takes_the_locks_of_its_process(settings, engine, tmp_path):
    from dreamer.runtime import Runtime

    index = make_index("edge", tmp_path)
    with Runtime.open(settings, engine=engine, llm=None, embedder=None, index=index) as rt:
        assert isinstance(rt.user_locks, ProcessLocks)
        with rt.user_locks.hold("alice"):
            assert holder(engine, lock_name("alice")) is None  # nothing written to the store
            with pytest.raises(UserLocked, match=r"^user 'alice': .* gave up after 0 s$"):
                with ProcessLocks(wait_seconds=0, clock=ManualClock()).hold("alice"):  # another runtime of the process
                    pass
    index.close()
