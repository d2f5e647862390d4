"""One consolidation of a user at a time: two passes over sessions of one user at once add
one memory, a held lock is waited for and then given up with a retryable error, and with an
index taken in turns no lock is taken (the turn serialises, a lock could deadlock with it)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from dreamkit import ManualClock, extraction_bodies, extraction_script, make_index, make_runtime
from sqlmodel import select

from dreamer.core.errors import Retryable
from dreamer.core.models import Cursor, Lease, Memory, MemoryEvent
from dreamer.engine.dream import dream_pass, run_pass
from dreamer.engine.jobs import run_session
from dreamer.engine.shared_index import end_turn, open_shared_runtime
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store import leases
from dreamer.store.db import session_scope
from dreamer.store.user_locks import LeaseLocks, ProcessLocks, Unlocked, UserLocked, lock_name
from workers.scheduler import InlineExecutor

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
    ids = [
        record_messages(engine, f"s{n}", session_with("I prefer green tea in the morning."), user_id="alice").session_id
        for n in (1, 2)
    ]
    runtimes = [
        make_runtime(settings, engine, server, index, user_locks=LOCKS[kind](engine, index.lock_sleep)) for _ in ids
    ]
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
    session_id = record_messages(
        engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice"
    ).session_id
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


LOCKED_OUT = "1 session(s) left due: another writer kept their user's consolidation lock"


@pytest.fixture
def leased(settings, engine, server, tmp_path):
    """A runtime as with a Qdrant server (lease locks on the store; its index handed in), waiting
    0 s for a lock; `locks` replaces its lease locks."""
    made = []

    def build(locks=None, **over):
        quick = settings.model_copy(
            update={"user_lock_wait_seconds": 0, "qdrant_url": "http://127.0.0.1:1", "min_rounds": 0, **over}
        )
        index = make_index("edge", tmp_path / f"i{len(made)}")
        rt = make_runtime(quick, engine, server, index, **({"user_locks": locks} if locks else {}))
        made.append((rt, index))
        return rt

    yield build
    for rt, index in made:
        rt.close()
        index.close()


def processed(engine, session_id: int) -> int:
    with session_scope(engine) as s:
        return s.get(Cursor, session_id).processed_seq


def test_with_a_qdrant_server_a_pass_leaves_a_locked_users_session_due_and_dreams_the_rest(engine, leased):
    alice = record_messages(
        engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice"
    ).session_id
    bob = record_messages(engine, "s2", session_with("I prefer black coffee at night."), user_id="bob").session_id
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)
    rt = leased()
    assert isinstance(rt.user_locks, LeaseLocks)

    dreamed = run_pass(rt, session_ids=[alice, bob])
    first = dreamed.run
    assert (first.status, first.sessions, first.added, first.failed_sessions, first.error) == (
        "partial",
        1,
        1,
        0,
        LOCKED_OUT,
    )
    assert dreamed.left_locked() and dreamed.tally.locked_out == 1
    assert (processed(engine, alice), processed(engine, bob)) == (0, 4)
    assert [m.text for m in memories(engine, "bob")] == ["The user prefers black coffee at night."]
    assert memories(engine) == [] and holder(engine, lock_name("alice")) == ELSEWHERE

    leases.release(engine, lock_name("alice"), ELSEWHERE)
    again = run_pass(rt, session_ids=[alice, bob])
    second = again.run
    assert (second.status, second.sessions, second.added, second.error, again.left_locked()) == (
        "ok",
        1,
        1,
        None,
        False,
    )
    assert [m.text for m in memories(engine)] == ["The user prefers green tea in the morning."]
    with session_scope(engine) as s:
        assert s.get(Cursor, alice).attempts == 0  # not the session's fault: nothing toward quarantine


def test_once_a_users_lock_was_waited_for_in_vain_their_later_sessions_wait_for_the_next_pass(engine, server, leased):
    ids = [
        record_messages(engine, f"s{n}", session_with(f"I prefer tea number {n}."), user_id="alice").session_id
        for n in (1, 2, 3)
    ]
    bob = record_messages(engine, "s4", session_with("I prefer black coffee at night."), user_id="bob").session_id
    clock, slept = ManualClock(), []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.now += seconds

    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)
    rt = leased(
        LeaseLocks(engine, ttl_seconds=600, wait_seconds=1, poll_seconds=0.5, clock=clock, sleep=sleep),
        sessions_per_call=1,
    )
    run = dream_pass(rt, session_ids=[*ids, bob])

    assert slept == [0.5, 0.5]  # one wait in all, not one a session
    assert len(extraction_bodies(server)) == 2  # alice's first session and bob's: the others were not extracted
    assert (run.status, run.sessions, run.error) == ("partial", 1, LOCKED_OUT.replace("1 session(s)", "3 session(s)"))
    assert [processed(engine, sid) for sid in (*ids, bob)] == [0, 0, 0, 4]


def test_a_session_task_whose_users_lock_is_kept_elsewhere_is_retried(engine, leased):
    alice = record_messages(
        engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice"
    ).session_id
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)
    rt = leased()

    with pytest.raises(UserLocked) as caught:
        run_session(rt, alice, trigger="celery")
    assert str(caught.value) == f"session {alice}: {LOCKED_OUT}"
    assert isinstance(caught.value, Retryable) and caught.value.delay == 5.0

    leases.release(engine, lock_name("alice"), ELSEWHERE)
    [run] = run_session(rt, alice, trigger="celery")
    assert (run.status, run.added, processed(engine, alice)) == ("ok", 1, 4)


def test_the_daemon_retries_early_a_pass_that_left_a_locked_users_session(settings, engine, leased):
    record_messages(engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice")
    assert leases.acquire(engine, lock_name("alice"), ELSEWHERE, 600)
    rt = leased()
    ran = InlineExecutor(rt)(lambda: False)
    assert ran.cut_short == LOCKED_OUT


def test_a_lease_hold_is_renewed_from_half_its_time_and_refused_once_another_writer_had_it(engine):
    clock = ManualClock()
    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=0, clock=clock, sleep=lambda s: None)
    name = lock_name("alice")

    def expiry():
        with session_scope(engine) as s:
            return s.get(Lease, name).expires_at

    with locks.hold("alice") as lock:
        taken = expiry()
        clock.now += 299
        lock.confirm()
        assert expiry() == taken  # not yet due: no write
        clock.now += 1
        lock.confirm()
        renewed = expiry()
        assert renewed > taken
        mine = holder(engine, name)
        clock.now += 300  # the lease ran out; another writer took it and has finished since
        leases.release(engine, name, mine)
        assert leases.acquire(engine, name, ELSEWHERE, 600)
        leases.release(engine, name, ELSEWHERE)
        with pytest.raises(UserLocked) as caught:
            lock.confirm()
    assert str(caught.value) == (
        "user 'alice': the consolidation lock ran out during planning and another writer took it; nothing was applied"
    )
    assert caught.value.delay == 5.0


class TakenWhilePlanning:
    """An index whose neighbour search (the pass planning) outlasts the user's lease: the clock
    moves past it and another writer takes the lease."""

    def __init__(self, inner, engine, clock: ManualClock, user_id: str) -> None:
        self.inner, self.engine, self.clock, self.user_id = inner, engine, clock, user_id

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def search_dense_many(self, *args):
        self.clock.now += 600
        with session_scope(self.engine) as s:
            s.get(Lease, lock_name(self.user_id)).owner = ELSEWHERE
        return self.inner.search_dense_many(*args)


def test_a_plan_that_outlasted_its_lease_is_not_applied(settings, engine, server, tmp_path):
    alice = record_messages(
        engine, "s1", session_with("I prefer green tea in the morning."), user_id="alice"
    ).session_id
    clock = ManualClock()
    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=0, clock=clock, sleep=lambda s: None)
    index = make_index("edge", tmp_path)
    rt = make_runtime(settings, engine, server, TakenWhilePlanning(index, engine, clock, "alice"), user_locks=locks)
    try:
        run = dream_pass(rt, session_ids=[alice])
    finally:
        rt.close()
        index.close()

    assert (run.status, run.sessions, run.added, run.error) == ("partial", 0, 0, LOCKED_OUT)
    assert processed(engine, alice) == 0 and memories(engine) == []
    assert holder(engine, lock_name("alice")) == ELSEWHERE  # the other writer's lease is left alone


def test_with_the_embedded_index_a_runtime_takes_the_locks_of_its_process(settings, engine, tmp_path):
    from dreamer.engine.runtime import Runtime

    index = make_index("edge", tmp_path)
    with Runtime.open(settings, engine=engine, llm=None, embedder=None, index=index) as rt:
        assert isinstance(rt.user_locks, ProcessLocks)
        with rt.user_locks.hold("alice"):
            assert holder(engine, lock_name("alice")) is None  # nothing written to the store
            with pytest.raises(UserLocked, match=r"^user 'alice': .* gave up after 0 s$"):
                with ProcessLocks(wait_seconds=0, clock=ManualClock()).hold("alice"):  # another runtime of the process
                    pass
    index.close()


def test_an_agent_write_whose_plan_outlasted_its_lease_stores_nothing(settings, engine, server, tmp_path):
    from dreamer.core.scope import Scope
    from dreamer.online.agent_writes import remember

    clock = ManualClock()
    locks = LeaseLocks(engine, ttl_seconds=600, wait_seconds=0, clock=clock, sleep=lambda s: None)
    index = make_index("edge", tmp_path)
    rt = make_runtime(settings, engine, server, TakenWhilePlanning(index, engine, clock, "alice"), user_locks=locks)
    try:
        with pytest.raises(UserLocked, match="^user 'alice': the consolidation lock ran out during planning"):
            remember(rt, Scope(user_id="alice"), "The user prefers short answers.")
    finally:
        rt.close()
        index.close()
    assert memories(engine) == [] and events(engine) == Counter()
