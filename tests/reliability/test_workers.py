"""Concurrency: four Celery worker processes on Redis and on RabbitMQ over one PostgreSQL store,
two of them SIGKILLed mid-task. Every session's messages are extracted once (a task whose worker
died mid-call is redelivered and its call made again, nothing applied twice), no cursor update
is lost, and the whole queue drains (no deadlock between the workers' leases, row locks and the
embedded index's turns)."""

from __future__ import annotations

from collections import Counter

import pytest
from celerykit import (  # noqa: F401  (fixtures)
    MARKER,
    all_done,
    broker,
    celery_setup,
    events,
    memories,
    processed,
    requests_per_session,
    server,
    session_with,
    store,
    wait_for,
)
from dreamkit import extraction_script

from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply

pytestmark = pytest.mark.reliability

SESSIONS = 40
DOOMED = "s00"


def _script(calls: Counter):
    """Every call takes a little while; the doomed session's first call never comes back in time."""
    script = extraction_script()

    def answer(body):
        found = MARKER.search(body["messages"][-1]["content"])
        name = found.group(1) if found else None
        if name:
            calls[name] += 1
        if name == DOOMED and calls[name] == 1:
            return Reply.delay(60, script(body))
        return Reply.delay(0.1, script(body))

    return answer


def test_four_workers_with_two_killed_extract_every_message_once(celery_setup, store, server, figures):
    app, workers, queue = celery_setup
    workers.env["DREAMER_MAX_SESSIONS_PER_PASS"] = str(SESSIONS)  # one fan-out covers every session
    calls: Counter = Counter()
    server.set_script(_script(calls))
    names = [f"s{i:02d}" for i in range(SESSIONS)]
    ids = {
        name: record_messages(store, name, session_with(name, f"colour number {i}"), user_id=f"u{i % 4}").session_id
        for i, name in enumerate(names)
    }

    workers.start("w1")
    workers.wait_ready("w1")
    app.send_task("dreamer.dream_session", args=[ids[DOOMED]], kwargs={"trigger": "test"}, queue=queue)
    wait_for(lambda: calls[DOOMED] == 1, 60, "w1 to be inside the doomed session's call", workers)
    for w in ("w2", "w3", "w4"):
        workers.start(w)
    workers.wait_ready("w2", "w3", "w4")
    for _ in range(2):  # the same due sessions, fanned out twice
        app.send_task("dreamer.dream_pass", kwargs={"trigger": "test"}, queue=queue)
    workers.kill("w1")
    wait_for(lambda: sum(calls.values()) >= SESSIONS // 2, 120, "half of the sessions to be called", workers)
    workers.kill("w2")  # wherever it is: inside a call, between tasks, applying a result
    workers.start("w5")
    workers.wait_ready("w5")
    wait_for(lambda: all_done(store), 240, "every session dreamed", workers)

    per_session = requests_per_session(server)
    again = sorted(n for n, c in per_session.items() if c > 1)
    texts = sorted(m.text for m in memories(store))
    figures(
        "workers: sessions / worker processes / SIGKILLed mid-run",
        f"{SESSIONS} / 5 / 2 ({store.dialect.name}, {app.conf.broker_url.split(':', 1)[0]})",
        f"calls made again after a worker died: {again}",
    )
    assert set(per_session) == set(names)
    assert per_session[DOOMED] == 2  # the redelivered task called once more, and only once
    assert len(again) <= 2 and max(per_session.values()) == 2
    assert texts == sorted(f"The user prefers colour number {i}." for i in range(SESSIONS))
    assert events(store) == Counter({"add": SESSIONS})
    assert set(processed(store).values()) == {(8, 8)}
    for w in ("w3", "w4", "w5"):
        assert "Traceback" not in workers.log(w)
