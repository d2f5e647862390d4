"""Celery for real: `celery -A workers.celery_app worker` subprocesses on Redis and on RabbitMQ,
a PostgreSQL store, the scripted LLM server over HTTP. Each test has its own queue, so stray
workers never steal its tasks.

The workers share one data folder, so they share one embedded Qdrant Edge index, taken in
turns (`dreamer.shared_index`): extraction runs in both at once, consolidation one at a time.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections import Counter

from celerykit import (  # noqa: F401  (fixtures)
    MARKER,
    all_done,
    broker,
    celery_setup,
    events,
    memories,
    requests_per_session,
    server,
    session_with,
    store,
    wait_for,
)
from dreamkit import extraction_script

from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply


def test_two_workers_dream_every_session_exactly_once(celery_setup, store, server):
    app, workers, queue = celery_setup
    server.set_script(lambda body, script=extraction_script(): Reply.delay(0.2, script(body)))
    names = [f"s{i:02d}" for i in range(8)]
    for i, name in enumerate(names):
        preference = "dark mode in every editor" if i in (0, 1) else f"colour number {i}"
        record_messages(store, name, session_with(name, preference), user_id="alice" if i < 5 else "bob")
    workers.start("w1")
    workers.start("w2")
    workers.wait_ready("w1", "w2")

    for _ in range(2):  # the same due sessions, fanned out twice
        app.send_task("dreamer.dream_pass", kwargs={"trigger": "test"}, queue=queue)
    wait_for(lambda: all_done(store), 90, "every session dreamed", workers)
    wait_for(
        lambda: sum(workers.log(w).count("dreamer.dream_session[") for w in ("w1", "w2")) >= 4 * len(names),
        60,
        "every fanned-out task to finish",
        workers,
    )

    assert requests_per_session(server) == Counter({name: 1 for name in names})
    assert sorted(m.text for m in memories(store)) == sorted(
        ["The user prefers dark mode in every editor."] + [f"The user prefers colour number {i}." for i in range(2, 8)]
    )
    assert events(store) == Counter({"add": 7, "merge": 1})
    for w in ("w1", "w2"):
        assert "dreamer.dream_session[" in workers.log(w) and "succeeded" in workers.log(w)

    app.send_task("dreamer.reprocess", args=[{"user_id": "bob"}], queue=queue)
    wait_for(lambda: events(store)["merge"] == 4 and all_done(store), 60, "bob's sessions reprocessed", workers)
    assert requests_per_session(server) == Counter({n: (2 if n in ("s05", "s06", "s07") else 1) for n in names})
    assert len(memories(store)) == 7
    assert "Traceback" not in workers.log("w1") + workers.log("w2")


def test_a_task_whose_worker_dies_is_redelivered_and_still_counted_once(celery_setup, store, server):
    app, workers, queue = celery_setup
    calls = Counter()
    script = extraction_script()

    def slow_first_time(body):
        name = MARKER.search(body["messages"][-1]["content"]).group(1)
        calls[name] += 1
        return Reply.delay(30, script(body)) if calls[name] == 1 else script(body)

    server.set_script(slow_first_time)
    rec = record_messages(store, "s00", session_with("s00", "aisle seats"), user_id="alice")
    workers.start("doomed")
    workers.wait_ready("doomed")
    app.send_task("dreamer.dream_session", args=[rec.session_id], kwargs={"trigger": "test"}, queue=queue)
    wait_for(lambda: calls["s00"] == 1, 60, "the first worker to be mid-call", workers)

    workers.start("survivor")
    workers.wait_ready("survivor")
    workers.kill("doomed")
    wait_for(lambda: all_done(store), 90, "the redelivered task", workers)

    assert calls["s00"] == 2  # one request died with its worker, one was answered
    [m] = memories(store)
    assert m.text == "The user prefers aisle seats."
    assert events(store) == Counter({"add": 1})
    assert "dreamer.dream_session[" in workers.log("survivor")


def test_a_worker_started_with_a_bad_setting_says_which_in_one_line_and_exits_1(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    env["DREAMER_LEASE_SECONDS"] = "0"
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "-Q", "unused"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        1,
        "",
        "error: DREAMER_LEASE_SECONDS: Input should be greater than 0\n",
    )


def test_a_session_task_backs_off_while_the_agent_is_busy_then_is_skipped_unless_a_reprocess_asked(tmp_path, caplog):
    """The tasks applied in this process (Celery retries an applied task at once, so every retry
    finds the agent still busy); no broker is needed for that. Another app was built in the
    process first, as the daemon's Celery executor builds one: each app runs its own tasks."""
    from dreamer.core.models import Cursor
    from dreamer.core.settings import Settings
    from dreamer.store import db
    from dreamer.store.busy import SqlBusySignal, activity_key
    from workers.celery_app import make_app

    settings = Settings(
        _env_file=None, data_dir=tmp_path / "data", embedder="none", llm_base_url="", task_max_retries=2, min_rounds=0
    )
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    sid = record_messages(engine, "s1", session_with("s1", "tea"), user_id="alice").session_id
    SqlBusySignal(engine, window_seconds=settings.busy_window_seconds).begin(activity_key("alice"))
    other = make_app(settings.model_copy(update={"data_dir": tmp_path / "other"}))
    assert "dreamer.dream_session" in other.tasks  # its tasks registered first
    app = make_app(settings)
    caplog.set_level(logging.INFO, logger="workers.celery_app")
    try:
        waited = app.tasks["dreamer.dream_session"].apply(args=[sid]).get()
        retries = [
            (m.group(1), float(m.group(2)))
            for r in caplog.records
            if (m := re.fullmatch(r"dreamer\.dream_session: .*; retry (\d) in ([0-9.]+) s", r.getMessage()))
        ]
        asked = (
            app.tasks["dreamer.dream_session"]
            .apply(args=[sid], kwargs={"trigger": "reprocess", "catch_up": True})
            .get()
        )
        fanned = app.tasks["dreamer.dream_pass"].apply().get()
    finally:
        app.dreamer_runtime.close()
    assert waited == {"skipped": f"session {sid} waits: 1 request(s) in flight"}
    assert [n for n, _ in retries] == ["1", "2"]  # the busy backoff: 60 s, then 120 s, each +-25 %
    assert 45 <= retries[0][1] <= 75 and 90 <= retries[1][1] <= 150
    assert (asked["session_id"], asked["messages"], asked["added"]) == (sid, 8, 1)
    assert fanned == {"sessions": []}  # nothing left due: nothing to wait for
    with db.session_scope(engine) as s:
        assert s.get(Cursor, sid).processed_seq == 8
    engine.dispose()


def test_a_redelivered_reprocess_task_does_not_rewind_the_cursors_again(tmp_path):
    """Tasks applied in this process, each `dream_session` it sends run at once; a redelivery
    is the same task id again."""
    from sqlmodel import select

    from dreamer.core.models import DreamRun, Lease
    from dreamer.core.settings import Settings
    from dreamer.store import db
    from workers.celery_app import make_app

    settings = Settings(_env_file=None, data_dir=tmp_path / "data", embedder="none", llm_base_url="")
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    record_messages(engine, "s1", session_with("s1", "tea"), user_id="alice")
    app = make_app(settings)
    app.conf.task_always_eager = True

    def read(task_id: str) -> tuple[int, int]:
        """Apply the task under `task_id`; the messages every pass so far has read."""
        app.tasks["dreamer.reprocess"].apply(args=[{"user_id": "alice"}], task_id=task_id).get()
        with db.session_scope(engine) as s:
            return sum(r.messages for r in s.exec(select(DreamRun)))

    try:
        assert read("request-1") == 8  # rewound and dreamed
        assert read("request-1") == 8  # redelivered: nothing rewound, nothing read again
        assert read("request-2") == 16  # a new request rewinds again
    finally:
        app.dreamer_runtime.close()
    with db.session_scope(engine) as s:
        marks = sorted(m.name for m in s.exec(select(Lease).where(Lease.name.like("reprocess:%"))))
    assert marks == ["reprocess:request-1", "reprocess:request-2"]
    engine.dispose()
