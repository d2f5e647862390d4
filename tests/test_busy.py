"""Busy signals (SQL and real Redis) and the backoff between tries."""

from __future__ import annotations

import time
import uuid
from datetime import timedelta

import pytest
from conftest import REDIS_URL, need_service
from sqlmodel import select

from dreamer.core.errors import Retryable
from dreamer.core.models import Activity, utcnow
from dreamer.store.busy import (
    AlwaysIdle,
    CoalescedBusy,
    RedisBusySignal,
    SqlBusySignal,
    activity,
    activity_key,
    build_busy_signal,
    busy_backoff,
    owner_busy,
)
from dreamer.store.db import session_scope

# --------------------------------------------------------------------------- backoff


@pytest.mark.parametrize("attempt, expected", [(0, 60), (1, 120), (2, 240), (3, 480), (4, 960), (5, 1800), (40, 1800)])
def test_backoff_doubles_from_the_base_and_stops_at_the_cap(attempt, expected):
    assert busy_backoff(attempt, base=60, cap=1800, rand=0.5) == expected


@pytest.mark.parametrize(
    "attempt, rand, expected",
    [
        (0, 0.0, 45.0),
        (0, 1.0, 75.0),
        (1, 0.0, 90.0),
        (1, 0.25, 105.0),
        (2, 1.0, 300.0),
        (4, 1.0, 1200.0),
        (5, 0.0, 1350.0),
        (5, 1.0, 1800.0),
    ],
)
def test_backoff_jitter_spreads_a_quarter_either_way_within_the_cap(attempt, rand, expected):
    assert busy_backoff(attempt, base=60, cap=1800, rand=rand) == pytest.approx(expected)


def test_backoff_with_other_settings_and_no_jitter():
    assert busy_backoff(3, base=0.5, cap=10, rand=0.9, jitter=0.0) == 4.0
    assert busy_backoff(10_000, base=1, cap=7, rand=0.3, jitter=0.0) == 7


@pytest.mark.parametrize("attempt, rand", [(-1, 0.5), (0, -0.1), (0, 1.1)])
def test_backoff_rejects_nonsense(attempt, rand):
    with pytest.raises(ValueError):
        busy_backoff(attempt, base=60, cap=1800, rand=rand)


# --------------------------------------------------------------------------- SQL


def test_sql_signal_counts_requests_in_flight_and_recent_activity(engine):
    signal = SqlBusySignal(engine, window_seconds=60)
    assert signal.busy_reason() is None
    key = activity_key(user_id="alice")
    signal.begin(key)
    signal.begin(key)
    assert signal.busy_reason() == "2 request(s) in flight"
    signal.end(key)
    signal.end(key)
    signal.end(key)  # never below zero
    assert signal.busy_reason() == "activity within the last 60 s"
    assert signal.busy_reason(utcnow() + timedelta(seconds=61)) is None


def test_sql_signal_through_the_activity_block(engine):
    signal = SqlBusySignal(engine, window_seconds=30)
    with activity(signal, "alice", agent_id="bot-1"):
        assert signal.busy_reason() == "1 request(s) in flight"
    assert "activity" in signal.busy_reason()


def _rows(engine) -> list[tuple[str, int]]:
    with session_scope(engine) as s:
        return [(a.key, a.in_flight) for a in s.exec(select(Activity).order_by(Activity.key))]


def test_coalesced_signal_writes_only_the_first_begin_and_the_last_end(engine):
    inner = SqlBusySignal(engine, window_seconds=60)
    signal = CoalescedBusy(inner)
    alice, bob = activity_key(user_id="alice"), activity_key("bob", agent_id="bot")
    for _ in range(3):
        signal.begin(alice)
    signal.begin(bob)
    assert _rows(engine) == sorted([(bob, 1), (alice, 1)])
    assert signal.busy_reason() == "2 request(s) in flight"
    signal.end(alice)
    signal.end(alice)
    assert _rows(engine) == sorted([(bob, 1), (alice, 1)])
    signal.end(alice)
    signal.end(alice)  # one end too many changes nothing
    signal.end(bob)
    assert _rows(engine) == sorted([(bob, 0), (alice, 0)])
    assert signal.busy_reason() == "activity within the last 60 s"
    signal.begin(alice)
    assert _rows(engine) == sorted([(bob, 0), (alice, 1)])


class _Unreachable:
    def __init__(self) -> None:
        self.calls = 0

    def begin(self, key: str) -> None:
        self.calls += 1
        if self.calls == 1:
            raise Retryable("down")

    def end(self, key: str) -> None:
        self.calls += 1


def test_coalesced_signal_does_not_count_a_begin_that_failed():
    inner = _Unreachable()
    signal = CoalescedBusy(inner)
    with pytest.raises(Retryable):
        signal.begin("user:a")
    signal.end("user:a")  # the failed request's own end: nothing to undo
    assert inner.calls == 1
    signal.begin("user:a")  # the next request tries the shared signal again
    signal.end("user:a")
    assert inner.calls == 3


# --------------------------------------------------------------------------- Redis


@pytest.fixture
def redis_client():
    need_service("Redis", "127.0.0.1", 6379)
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    prefix = f"dreamer-test:{uuid.uuid4().hex[:12]}"
    yield client, prefix
    keys = list(client.scan_iter(match=f"{prefix}*"))
    if keys:
        client.delete(*keys)
    client.close()


def test_redis_signal_counts_requests_in_flight(redis_client):
    client, prefix = redis_client
    signal = RedisBusySignal(client, window_seconds=60, prefix=prefix)
    assert signal.busy_reason() is None
    signal.begin("user:alice")
    signal.begin("user:alice")
    signal.begin("agent:bot")
    assert signal.busy_reason() == "3 request(s) in flight"
    signal.end("user:alice")
    assert signal.busy_reason() == "2 request(s) in flight"
    signal.end("user:alice")
    signal.end("agent:bot")
    signal.end("agent:bot")  # an extra end leaves no negative count behind
    assert client.get(f"{prefix}:inflight:agent:bot") is None
    assert signal.busy_reason() == "activity within the last 60 s"


def test_redis_activity_expires_with_its_window(redis_client):
    client, prefix = redis_client
    signal = RedisBusySignal(client, window_seconds=1, prefix=prefix)
    with activity(signal, user_id="alice"):
        assert signal.busy_reason() == "1 request(s) in flight"
    assert signal.busy_reason() == "activity within the last 1 s"
    assert 0 < client.pttl(f"{prefix}:last:{activity_key('alice')}") <= 1000
    time.sleep(1.2)
    assert signal.busy_reason() is None
    assert client.exists(f"{prefix}:last:{activity_key('alice')}") == 0


def test_redis_signal_judges_against_the_time_it_is_given(redis_client):
    client, prefix = redis_client
    signal = RedisBusySignal(client, window_seconds=60, prefix=prefix)
    signal.begin("user:bob")
    signal.end("user:bob")
    assert signal.busy_reason(utcnow()) is not None
    assert signal.busy_reason(utcnow() + timedelta(seconds=120)) is None


def test_a_crashed_callers_in_flight_count_expires(redis_client):
    client, prefix = redis_client
    signal = RedisBusySignal(client, window_seconds=0.2, prefix=prefix, inflight_ttl_seconds=0.5)
    signal.begin("user:carol")  # and never ends
    assert signal.busy_reason() == "1 request(s) in flight"
    time.sleep(0.7)
    assert signal.busy_reason() is None


def test_prefixes_keep_deployments_apart_even_with_glob_characters(redis_client):
    client, prefix = redis_client
    starred = RedisBusySignal(client, window_seconds=60, prefix=f"{prefix}*")
    starred.begin("user:x")
    assert starred.busy_reason() == "1 request(s) in flight"
    assert RedisBusySignal(client, window_seconds=60, prefix=prefix).busy_reason() is None
    assert RedisBusySignal(client, window_seconds=60, prefix=f"{prefix}?").busy_reason() is None
    starred.end("user:x")


def test_an_unreachable_redis_is_a_retryable_error():
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))
    signal = RedisBusySignal(client, window_seconds=60)
    with pytest.raises(Retryable, match="busy signal unavailable"):
        signal.busy_reason()


def test_build_busy_signal_follows_the_setting(settings, sqlite_engine, redis_client):
    client, prefix = redis_client
    assert isinstance(build_busy_signal(settings, sqlite_engine), SqlBusySignal)
    redis_settings = settings.model_copy(
        update={"busy_backend": "redis", "busy_key_prefix": prefix, "redis_url": REDIS_URL}
    )
    signal = build_busy_signal(redis_settings, sqlite_engine)
    assert isinstance(signal, RedisBusySignal)
    assert signal.prefix == prefix and signal.window == settings.busy_window_seconds
    signal.begin("user:dana")
    assert client.get(f"{prefix}:inflight:user:dana") == b"1"
    signal.end("user:dana")


# --------------------------------------------------------------------------- per scope


def test_activity_keys_are_one_per_scope_whatever_the_ids_hold():
    keys = {
        activity_key("alice"),
        activity_key("bob"),
        activity_key("alice", "bot"),
        activity_key("bob", "bot"),  # the same agent id under another user is another scope
        activity_key("a/b", "c"),
        activity_key("a", "b/c"),
        activity_key("u" * 255, "a" * 255),
    }
    assert len(keys) == 7
    assert all(len(k) <= 255 for k in keys)
    assert activity_key("alice").startswith("user:") and activity_key("alice", "bot").startswith("agent:")


def test_owner_busy_holds_back_only_the_busy_users_sessions_and_the_busy_agents():
    busy = {
        activity_key("alice"): "1 request(s) in flight",
        activity_key("bob", "bot"): "activity within the last 60 s",
    }
    assert owner_busy(busy, "alice", None) == "1 request(s) in flight"
    assert owner_busy(busy, "alice", "any-agent") == "1 request(s) in flight"  # the whole user is busy
    assert owner_busy(busy, "bob", "bot") == "activity within the last 60 s"
    assert owner_busy(busy, "bob", None) is None  # the agent's requests leave bob's own sessions alone
    assert owner_busy(busy, "bob", "other") is None
    assert owner_busy(busy, "carol", "bot") is None
    assert owner_busy({}, "alice", None) is None


def test_sql_signal_names_each_busy_key(engine):
    signal = SqlBusySignal(engine, window_seconds=60)
    alice, bot = activity_key("alice"), activity_key("bob", "bot")
    signal.begin(alice)
    signal.begin(alice)
    signal.begin(bot)
    signal.end(bot)
    assert signal.busy_keys() == {alice: "2 request(s) in flight", bot: "activity within the last 60 s"}
    assert CoalescedBusy(signal).busy_keys() == signal.busy_keys()
    assert signal.busy_keys(utcnow() + timedelta(seconds=61)) == {alice: "2 request(s) in flight"}
    assert AlwaysIdle().busy_keys() == {}


def test_redis_signal_names_each_busy_key(redis_client):
    client, prefix = redis_client
    signal = RedisBusySignal(client, window_seconds=60, prefix=prefix)
    alice, bot = activity_key("alice"), activity_key("bob", "bot")
    assert signal.busy_keys() == {}
    signal.begin(alice)
    signal.begin(alice)
    signal.begin(bot)
    signal.end(bot)
    assert signal.busy_keys() == {alice: "2 request(s) in flight", bot: "activity within the last 60 s"}
    assert signal.busy_keys(utcnow() + timedelta(seconds=120)) == {alice: "2 request(s) in flight"}
    signal.end(alice)
    signal.end(alice)
    assert signal.busy_keys(utcnow() + timedelta(seconds=120)) == {}
