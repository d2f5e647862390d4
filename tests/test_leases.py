from datetime import timedelta

from sqlmodel import select

from dreamer.core.models import DreamRun, Lease, utcnow
from dreamer.engine.dream import dream_pass
from dreamer.engine.runtime import Runtime
from dreamer.store import leases
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope


def test_lease_is_exclusive_until_expiry(engine):
    now = utcnow()
    assert leases.acquire(engine, "session:1", "w1", 60, now)
    assert not leases.acquire(engine, "session:1", "w2", 60, now)
    assert leases.acquire(engine, "session:1", "w1", 60, now)  # the holder renews
    assert leases.acquire(engine, "session:1", "w2", 60, now + timedelta(seconds=61))
    assert not leases.acquire(engine, "session:1", "w1", 60, now + timedelta(seconds=62))


def test_release_frees_only_for_the_owner(engine):
    assert leases.acquire(engine, "session:2", "w1", 60)
    leases.release(engine, "session:2", "w2")
    assert not leases.acquire(engine, "session:2", "w2", 60)
    leases.release(engine, "session:2", "w1")
    assert leases.acquire(engine, "session:2", "w2", 60)


def _runs(engine) -> dict[int, tuple[str, str | None]]:
    with session_scope(engine) as s:
        return {r.id: (r.status, r.error) for r in s.exec(select(DreamRun).order_by(DreamRun.id))}


def test_a_running_run_without_a_live_run_lease_is_swept_as_abandoned(engine):
    now = utcnow()
    with session_scope(engine) as s:
        for status in ("running", "running", "running", "ok"):
            s.add(DreamRun(status=status))
    assert leases.acquire(engine, leases.run_lease(1), "host:1:1", 60, now)  # alive
    assert leases.acquire(engine, leases.run_lease(2), "host:2:2", 60, now - timedelta(seconds=61))  # expired
    # run 3 has no lease at all: its process died before its first session, or long ago
    assert leases.sweep_abandoned_runs(engine, now) == [2, 3]
    assert _runs(engine) == {
        1: ("running", None),
        2: ("abandoned", leases.ABANDONED),
        3: ("abandoned", leases.ABANDONED),
        4: ("ok", None),
    }
    assert leases.sweep_abandoned_runs(engine, now) == []


def test_a_pass_holds_its_run_lease_while_it_runs_and_gives_it_back(settings, engine):
    with session_scope(engine) as s:
        s.add(DreamRun(status="running"))  # left behind by a killed pass
    with Runtime.open(
        settings.model_copy(update={"extractor": "rules"}), engine=engine, llm=None, embedder=None, busy=AlwaysIdle()
    ) as rt:
        run = dream_pass(rt)
    assert _runs(engine) == {1: ("abandoned", leases.ABANDONED), run.id: ("ok", None)}
    with session_scope(engine) as s:
        assert s.exec(select(Lease)).all() == []


def test_a_run_lease_is_renewed_once_half_of_it_has_passed(engine):
    ticks = [100.0]
    assert leases.acquire(engine, leases.run_lease(7), "host:1:7", 60)
    lease = leases.RunLease(engine, 7, "host:1:7", 60, clock=lambda: ticks[0])

    def expiry():
        with session_scope(engine) as s:
            return s.get(Lease, "run:7").expires_at

    first = expiry()
    ticks[0] = 129.0
    lease.keep_alive()
    assert expiry() == first  # under half the lease: no write
    ticks[0] = 130.0
    lease.keep_alive()
    renewed = expiry()
    assert renewed > first
    ticks[0] = 159.0
    lease.keep_alive()
    assert expiry() == renewed  # measured from the renewal, not from the start


def test_a_held_lease_another_owner_took_is_reported_lost_and_left_to_them(engine):
    ticks = [100.0]
    assert leases.acquire(engine, "session:3", "me", 60, now=utcnow() - timedelta(seconds=120))  # expired
    held = leases.HeldLease(engine, "session:3", "me", 60, clock=lambda: ticks[0])
    assert leases.acquire(engine, "session:3", "them", 60)
    assert held.keep_alive() is True  # under half the lease: nothing asked
    ticks[0] = 130.0
    assert held.keep_alive() is False
    with session_scope(engine) as s:
        assert s.get(Lease, "session:3").owner == "them"
