"""Is the agent busy, and how long to wait when it is: the `BusySignal` protocol, its SQL,
Redis and always-idle implementations, the backoff before the next try, and which owners a
busy activity key holds back.

Busy is per scope: a request marks the key of its token's scope (`activity_key`: the user, or
one agent of the user), and a pass leaves due only the sessions of a busy scope (`owner_busy`);
one user's traffic never holds back another user's sessions."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from sqlalchemy import func, or_, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col, select

from dreamer.core.errors import ConfigError, Retryable
from dreamer.core.models import Activity, utcnow
from dreamer.store.db import session_scope

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

log = logging.getLogger(__name__)


class BusySignal(Protocol):
    def busy_reason(self, now: datetime | None = None) -> str | None:
        """Why some agent counts as busy now, or None when every one is idle."""

    def busy_keys(self, now: datetime | None = None) -> dict[str, str]:
        """The activity keys busy now, each with why."""

    def begin(self, key: str) -> None: ...

    def end(self, key: str) -> None: ...


class AlwaysIdle:
    """For passes that must never wait (tests, `dreamer dream --force`)."""

    def busy_reason(self, now: datetime | None = None) -> str | None:
        return None

    def busy_keys(self, now: datetime | None = None) -> dict[str, str]:
        return {}

    def begin(self, key: str) -> None:
        return None

    def end(self, key: str) -> None:
        return None


class SqlBusySignal:
    """Activity rows in the SQL store: an in-flight counter and the last time seen, per key."""

    def __init__(self, engine: Engine, *, window_seconds: float) -> None:
        self.engine = engine
        self.window = timedelta(seconds=window_seconds)

    def busy_reason(self, now: datetime | None = None) -> str | None:
        now = now or utcnow()
        with session_scope(self.engine) as s:
            in_flight = s.exec(select(func.coalesce(func.sum(Activity.in_flight), 0))).one()
            recent = s.exec(
                select(func.count()).select_from(Activity).where(Activity.last_seen > now - self.window)
            ).one()
        if in_flight:
            return in_flight_reason(in_flight)
        if recent:
            return recent_reason(self.window.total_seconds())
        return None

    def busy_keys(self, now: datetime | None = None) -> dict[str, str]:
        now = now or utcnow()
        with session_scope(self.engine) as s:
            rows = s.exec(
                select(Activity.key, Activity.in_flight).where(
                    or_(col(Activity.in_flight) > 0, col(Activity.last_seen) > now - self.window)
                )
            ).all()
        seconds = self.window.total_seconds()
        return {key: in_flight_reason(n) if n > 0 else recent_reason(seconds) for key, n in rows}

    def begin(self, key: str) -> None:
        self._bump(key, +1)

    def end(self, key: str) -> None:
        self._bump(key, -1)

    def _bump(self, key: str, delta: int) -> None:
        now = utcnow()
        stmt = (
            update(Activity)
            .where(col(Activity.key) == key)
            .values(
                in_flight=func.max(Activity.in_flight + delta, 0)
                if self._sqlite
                else func.greatest(Activity.in_flight + delta, 0),
                last_seen=now,
            )
        )
        with session_scope(self.engine) as s:
            if s.exec(stmt).rowcount:
                return
        try:
            with session_scope(self.engine) as s:
                s.add(Activity(key=key, in_flight=max(delta, 0), last_seen=now))
        except IntegrityError:
            with session_scope(self.engine) as s:
                s.exec(stmt)

    @property
    def _sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"


class RedisBusySignal:
    """Redis keys per activity key: an in-flight counter and a last-activity stamp with a TTL.

    `<prefix>:inflight:<key>` counts requests in flight (it expires after `inflight_ttl_seconds`
    without a new request, so a crashed caller cannot hold the dreamer off for ever);
    `<prefix>:last:<key>` holds the epoch time of the last begin/end and lives `window_seconds`.
    """

    _END = (
        "local v = redis.call('DECR', KEYS[1]) "
        "if v <= 0 then redis.call('DEL', KEYS[1]) else redis.call('PEXPIRE', KEYS[1], ARGV[1]) end "
        "return v"
    )

    def __init__(
        self,
        client: Any,
        *,
        window_seconds: float,
        prefix: str = "dreamer:busy",
        inflight_ttl_seconds: float = 3600,
    ) -> None:
        self.client = client
        self.window = float(window_seconds)
        self.prefix = prefix
        self.inflight_ttl_ms = max(1, int(inflight_ttl_seconds * 1000))
        self._end = client.register_script(self._END)

    def busy_reason(self, now: datetime | None = None) -> str | None:
        now = now or utcnow()
        with _redis_errors():
            in_flight = sum(int(v) for v in self._values("inflight") if v is not None)
            stamps = [float(v) for v in self._values("last") if v is not None]
        if in_flight > 0:
            return in_flight_reason(in_flight)
        if any(t > now.timestamp() - self.window for t in stamps):
            return recent_reason(self.window)
        return None

    def busy_keys(self, now: datetime | None = None) -> dict[str, str]:
        now = now or utcnow()
        with _redis_errors():
            in_flight = {k: int(v) for k, v in self._by_key("inflight").items() if v is not None}
            stamps = {k: float(v) for k, v in self._by_key("last").items() if v is not None}
        busy = {k: in_flight_reason(n) for k, n in in_flight.items() if n > 0}
        for key, at in stamps.items():
            if key not in busy and at > now.timestamp() - self.window:
                busy[key] = recent_reason(self.window)
        return busy

    def begin(self, key: str) -> None:
        with _redis_errors():
            pipe = self.client.pipeline()
            pipe.incr(self._key("inflight", key))
            pipe.pexpire(self._key("inflight", key), self.inflight_ttl_ms)
            self._stamp(pipe, key)
            pipe.execute()

    def end(self, key: str) -> None:
        with _redis_errors():
            self._end(keys=[self._key("inflight", key)], args=[self.inflight_ttl_ms])
            pipe = self.client.pipeline()
            self._stamp(pipe, key)
            pipe.execute()

    def _stamp(self, pipe: Any, key: str) -> None:
        pipe.set(self._key("last", key), repr(utcnow().timestamp()), px=max(1, int(self.window * 1000)))

    def _key(self, kind: str, key: str) -> str:
        return f"{self.prefix}:{kind}:{key}"

    def _values(self, kind: str) -> list[bytes | str | None]:
        return list(self._by_key(kind).values())

    def _by_key(self, kind: str) -> dict[str, bytes | str | None]:
        """The values of every `kind` key, by the activity key they are for."""
        pattern = f"{_glob_escape(self.prefix)}:{kind}:*"
        keys = list(self.client.scan_iter(match=pattern, count=500))
        if not keys:
            return {}
        head = len(f"{self.prefix}:{kind}:")
        names = [(k.decode() if isinstance(k, bytes) else str(k))[head:] for k in keys]
        return dict(zip(names, self.client.mget(keys)))


class CoalescedBusy:
    """One process's requests marked on a shared signal by transitions only: the first request
    of a key in flight calls `begin`, the last one to end calls `end`; the requests between
    touch nothing shared. The signal reads the same (busy while any is in flight, idle a window
    after the last one ends) at two writes per burst instead of two per request."""

    def __init__(self, inner: BusySignal) -> None:
        self.inner = inner
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def busy_reason(self, now: datetime | None = None) -> str | None:
        return self.inner.busy_reason(now)

    def busy_keys(self, now: datetime | None = None) -> dict[str, str]:
        return self.inner.busy_keys(now)

    def begin(self, key: str) -> None:
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            first = self._counts[key] == 1
        if first:
            try:
                self.inner.begin(key)
            except BaseException:  # not counted, so the next request tries again
                self._drop(key)
                raise

    def end(self, key: str) -> None:
        if self._drop(key) == 0:
            self.inner.end(key)

    def _drop(self, key: str) -> int | None:
        """One request of `key` fewer; how many are left (None when none was counted)."""
        with self._lock:
            count = self._counts.get(key)
            if count is None:
                return None
            if count > 1:
                self._counts[key] = count - 1
                return count - 1
            del self._counts[key]
            return 0


@contextmanager
def _redis_errors() -> Iterator[None]:
    import redis

    try:
        yield
    except redis.RedisError as exc:
        raise Retryable(f"busy signal unavailable (Redis): {exc}") from exc


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)


def build_busy_signal(settings: Settings, engine: Engine, *, client: Any = None) -> BusySignal:
    """The busy signal `settings.busy_backend` names: activity rows in SQL, or Redis keys."""
    if settings.busy_backend == "sql":
        return SqlBusySignal(engine, window_seconds=settings.busy_window_seconds)
    if settings.busy_backend == "redis":
        if client is None:
            import redis

            client = redis.Redis.from_url(settings.redis_url)
        return RedisBusySignal(
            client,
            window_seconds=settings.busy_window_seconds,
            prefix=settings.busy_key_prefix,
            inflight_ttl_seconds=settings.busy_inflight_ttl_seconds,
        )
    raise ConfigError(f"unknown busy backend {settings.busy_backend!r}: use sql or redis")


def busy_backoff(attempt: int, *, base: float, cap: float, rand: float, jitter: float = 0.25) -> float:
    """Seconds to wait before try `attempt + 1`: `base` doubling per attempt, capped at `cap`,
    spread by +-`jitter` (a fraction) with `rand` in [0, 1]; rand 0.5 gives the plain value."""
    if attempt < 0:
        raise ValueError(f"attempt must be >= 0, got {attempt}")
    if not 0.0 <= rand <= 1.0:
        raise ValueError(f"rand must be in [0, 1], got {rand}")
    plain = min(cap, base * 2.0 ** min(attempt, 62))
    return min(cap, plain * (1.0 - jitter + 2.0 * jitter * rand))


def in_flight_reason(count: int) -> str:
    return f"{count} request(s) in flight"


def recent_reason(window_seconds: float) -> str:
    return f"activity within the last {int(window_seconds)} s"


def activity_key(user_id: str, agent_id: str | None = None) -> str:
    """The key a request of this scope marks: ``user:<digest>`` for a token of the whole user,
    ``agent:<digest>`` for a token of one agent of the user. A digest of both ids, so no two
    scopes share a key (the same agent id under two users is two keys) and any id fits the
    255-character column."""
    kind = "agent" if agent_id is not None else "user"
    digest = hashlib.sha256(json.dumps([user_id, agent_id]).encode()).hexdigest()[:32]
    return f"{kind}:{digest}"


def owner_busy(busy: Mapping[str, str], user_id: str, agent_id: str | None) -> str | None:
    """Why the sessions of this owner wait, or None: their user is busy (a token of the whole
    user), or their agent is (a token of that agent of the user). A pure function of the busy
    keys; a session without an agent waits only for its user's own requests."""
    keys = [activity_key(user_id)] + ([activity_key(user_id, agent_id)] if agent_id is not None else [])
    return next((busy[k] for k in keys if k in busy), None)


@contextmanager
def activity(signal: BusySignal, user_id: str, agent_id: str | None = None) -> Iterator[None]:
    """Mark the scope active for the duration of a block."""
    key = activity_key(user_id, agent_id)
    signal.begin(key)
    try:
        yield
    finally:
        signal.end(key)


__all__ = [
    "AlwaysIdle",
    "BusySignal",
    "CoalescedBusy",
    "RedisBusySignal",
    "SqlBusySignal",
    "activity",
    "activity_key",
    "build_busy_signal",
    "busy_backoff",
    "owner_busy",
]
