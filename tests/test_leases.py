from datetime import timedelta

from dreamer import leases
from dreamer.models import utcnow


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
