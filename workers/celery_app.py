"""The Celery app: `celery -A workers.celery_app worker` / `beat`.

Settings are read once, when a worker or beat first asks for `app` (this module is the edge);
`make_app(settings)` builds an app from a given Settings for tests and for the daemon's
celery executor. Each worker process builds ONE Runtime at `worker_process_init` (or on its
first task under the solo pool) and shares it between tasks. Tasks ack late and are rejected
back to the queue when their worker dies, so a crash redelivers them; they are idempotent
under redelivery (cursor + lease). Only `dreamer.errors.Retryable` errors are retried, after
their own delay or an exponential backoff.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import random
import sys
import threading
from collections.abc import Callable
from typing import Any

from celery import Celery, Task
from celery.result import AsyncResult
from celery.signals import worker_process_init, worker_process_shutdown

from dreamer.core.errors import Busy, ConfigError, Retryable
from dreamer.core.settings import Settings, load_settings
from dreamer.engine.runtime import Runtime, settle
from dreamer.store.busy import busy_backoff
from dreamer.store.db import redact_url

log = logging.getLogger(__name__)

TaskFunction = Callable[..., Any]
Decorator = Callable[[TaskFunction], TaskFunction]

MARK_SECONDS = 24 * 3600  # a reprocess request's mark lasts at least a day: redeliveries may come twice


class ProcessRuntime:
    """The one Runtime of a worker process."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._rt: Runtime | None = None
        self._lock = threading.Lock()

    def get(self) -> Runtime:
        with self._lock:
            if self._rt is None:
                from dreamer.engine.shared_index import open_shared_runtime

                self._rt = open_shared_runtime(self.settings)
                log.info("worker runtime ready (database %s)", self._rt.engine.url.render_as_string(hide_password=True))
            return self._rt

    def open(self, **_signal: Any) -> None:
        settle(self.get())

    def close(self, **_signal: Any) -> None:
        with self._lock:
            if self._rt is not None:
                self._rt.close()
                self._rt.engine.dispose()
                self._rt = None


def make_app(settings: Settings) -> Celery:
    app = Celery("dreamer", broker=settings.broker_url, backend=settings.result_backend or None)
    app.conf.update(_config(settings))
    app.dreamer_runtime = ProcessRuntime(settings)
    _register(app, settings, app.dreamer_runtime)
    return app


def enqueue(app: Celery, settings: Settings, task: str, **options: Any) -> AsyncResult:
    """`app.send_task(task, **options)` on the settings' queue; `Retryable` naming the broker when
    it cannot be reached (not kombu's traceback)."""
    from kombu.exceptions import OperationalError

    try:
        return app.send_task(task, queue=settings.celery_queue, **options)
    except OperationalError as exc:
        raise Retryable(f"cannot reach the broker {redact_url(settings.broker_url)}: {exc}") from exc


def _config(settings: Settings) -> dict[str, Any]:
    visibility = settings.celery_visibility_timeout_seconds
    return {
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_default_queue": settings.celery_queue,
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "result_expires": 24 * 3600,
        "timezone": "UTC",
        "broker_connection_retry_on_startup": True,
        "broker_transport_options": {
            "visibility_timeout": visibility,
            "unacked_restore_interval": max(1, int(min(10.0, visibility / 4))),
            "unacked_restore_throttle": 1,
        },
        "beat_schedule": {
            "dream": {
                "task": "dreamer.dream_pass",
                "schedule": settings.dream_interval_seconds,
                "kwargs": {"trigger": "beat"},
                "options": {"queue": settings.celery_queue},
            },
        },
    }


def _retrying(settings: Settings) -> Decorator:
    """Retry a bound task on `Retryable` only: after the error's delay, else a backoff (a busy
    agent's as the daemon's, else the task retry's); a task the agent kept busy through every
    retry is skipped, its sessions left due."""

    def retry(task: Task, exc: Retryable, base: float, cap: float) -> BaseException:
        retries = task.request.retries
        countdown = exc.delay or busy_backoff(retries, base=base, cap=cap, rand=random.random())
        log.info("%s: %s; retry %d in %.1f s", task.name, exc, retries + 1, countdown)
        error: BaseException = task.retry(exc=exc, countdown=countdown, max_retries=settings.task_max_retries)
        return error

    def wrap(fn: TaskFunction) -> TaskFunction:
        @functools.wraps(fn)
        def task(self: Task, *args: Any, **kwargs: Any) -> Any:
            try:
                return fn(self, *args, **kwargs)
            except Busy as exc:  # the agent is busy: back off as the daemon does; in the end, skip
                if self.request.retries >= settings.task_max_retries:
                    log.info("%s: %s; skipped after %d retries", self.name, exc, self.request.retries)
                    return {"skipped": str(exc)}
                raise retry(self, exc, settings.backoff_base_seconds, settings.backoff_cap_seconds) from exc
            except Retryable as exc:
                raise retry(self, exc, settings.task_retry_base_seconds, settings.task_retry_cap_seconds) from exc

        return task

    return wrap


def _register(app: Celery, settings: Settings, process: ProcessRuntime) -> None:
    retrying = _retrying(settings)
    dream_session = _register_dream(app, settings, process, retrying)
    _register_reprocess(app, settings, process, retrying, dream_session)
    _register_flush(app, process, retrying)


def _register_dream(app: Celery, settings: Settings, process: ProcessRuntime, retrying: Decorator) -> Any:
    """`dreamer.dream_pass` and `dreamer.dream_session`; returns the latter, for those that send it."""

    @app.task(name="dreamer.dream_pass", bind=True, shared=False)  # type: ignore[untyped-decorator]
    @retrying
    def dream_pass(self: Task, trigger: str = "celery") -> dict[str, Any]:
        """Ingest what the watched folders gained, find the due sessions and send one `dream_session` per session."""
        from dreamer.engine.jobs import fan_out
        from dreamer.ingest.watch import ingest_sources

        rt = process.get()
        ingest_sources(rt.engine, rt.settings)  # what the watched folders gained, first
        queue = settings.celery_queue
        result = fan_out(
            rt,
            lambda sid: dream_session.apply_async(args=[sid], kwargs={"trigger": trigger}, queue=queue),
            trigger=trigger,
        )
        if result.skipped:
            raise Busy(result.skipped)
        return {"sessions": result.session_ids}

    @app.task(name="dreamer.dream_session", bind=True, shared=False)  # type: ignore[untyped-decorator]
    @retrying
    def dream_session(self: Task, session_id: int, trigger: str = "celery", catch_up: bool = False) -> dict[str, Any]:
        """Dream over one session (`dream_pass(rt, session_ids=[id])`); while the agent is busy it
        waits, unless a reprocess asked for it (`catch_up`)."""
        from dreamer.engine.jobs import run_session

        runs = run_session(process.get(), session_id, trigger=trigger, catch_up=catch_up, wait_while_busy=not catch_up)
        return {
            "session_id": session_id,
            "runs": [r.id for r in runs],
            "messages": sum(r.messages for r in runs),
            "added": sum(r.added for r in runs),
            "merged": sum(r.merged for r in runs),
        }

    return dream_session


def _register_reprocess(
    app: Celery, settings: Settings, process: ProcessRuntime, retrying: Decorator, dream_session: Any
) -> None:
    @app.task(name="dreamer.reprocess", bind=True, shared=False)  # type: ignore[untyped-decorator]
    @retrying
    def reprocess(self: Task, selection: dict[str, Any]) -> dict[str, Any]:
        """Reset the selected cursors (once: a redelivered task does not rewind them again) and
        send one catch-up `dream_session` per session (again when redelivered: they are no-ops
        for sessions already caught up)."""
        from dreamer.engine.records.reprocess import Once, Selection, reset_cursors, select_ids
        from dreamer.store.db import session_scope

        rt = process.get()
        with session_scope(rt.engine) as s:
            ids = select_ids(s, Selection.from_dict(selection))
        keep = max(MARK_SECONDS, 2 * settings.celery_visibility_timeout_seconds)
        reset_cursors(
            rt.engine, ids, once=Once(self.request.id, keep) if self.request.id else None
        )  # no id: called directly
        for sid in ids:
            dream_session.apply_async(
                args=[sid], kwargs={"trigger": "reprocess", "catch_up": True}, queue=settings.celery_queue
            )
        return {"sessions": ids}


def _register_flush(app: Celery, process: ProcessRuntime, retrying: Decorator) -> None:
    @app.task(name="dreamer.flush_session", bind=True, shared=False)  # type: ignore[untyped-decorator]
    @retrying
    def flush_session(self: Task, session_id: int) -> Any:
        """The online companion's flush (`dreamer.online.flush.notes.run_flush`) in a worker."""
        from dreamer.online.flush.notes import run_flush

        return _jsonable(run_flush(process.get(), session_id))


def _jsonable(value: Any) -> Any:
    """A task result the JSON serializer accepts (dataclasses as dicts, the rest as strings)."""
    data = dataclasses.asdict(value) if dataclasses.is_dataclass(value) and not isinstance(value, type) else value
    return json.loads(json.dumps(data, default=str))


_app: Celery | None = None


def _worker_app() -> Celery:
    """The app `celery -A workers.celery_app` finds, built from the environment on first use."""
    global _app
    if _app is None:
        try:
            settings = load_settings()
        except ConfigError as exc:  # `celery -A workers.celery_app ...` with a bad DREAMER_ value: one line
            sys.stderr.write(f"error: {exc}\n")
            raise SystemExit(1) from None
        _app = make_app(settings)
        process = _app.dreamer_runtime
        worker_process_init.connect(process.open, weak=False)
        worker_process_shutdown.connect(process.close, weak=False)
    return _app


def __getattr__(name: str) -> Any:
    if name in ("app", "celery"):
        return _worker_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
