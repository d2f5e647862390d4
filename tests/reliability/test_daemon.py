"""No runaway over time: the daemon left running for 1 000 simulated hours.

The real `DreamScheduler` (the pure policy of `dreamer.schedule` behind it) and its inline
executor run real passes over a SQLite store, the scripted model over HTTP and Qdrant Edge;
only the clock is simulated. The test drives it the way its APScheduler shell does: a fire at
every regular slot (`warmup`, then every `dream_interval_seconds`) and a one-off retry when a
fire backs off because the agent is busy, cancelled once a pass starts. Between fires a steady
trickle of messages arrives in each user's session of the day, and now and then the agent is in
the middle of a request (the SQL busy signal's in-flight counter) when a fire comes.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import Counter
from datetime import timedelta

import pytest
from dreamkit import extraction_script, is_judgement, transcript_lines
from sqlmodel import select

from dreamer.core.models import Cursor, DreamRun, Session, utcnow
from dreamer.engine.schedule import BACKOFF, RUN
from dreamer.ingest.store import append_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store.busy import SqlBusySignal, activity_key
from dreamer.store.db import session_scope
from workers.scheduler import DreamScheduler, InlineExecutor

from . import kit

pytestmark = pytest.mark.reliability

HOURS = 1000
INTERVAL = 4 * 3600
WARMUP = 120
TRICKLE = 3600  # one user message and its reply per user every simulated hour
USERS = 2
BUSY_SHARE = 0.25  # of the regular slots find the agent mid-request


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self):
        return self.now


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=kit.DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


def _settings(settings):
    # Sessions are stamped by the real clock while the simulated one runs 1 000 h ahead, so the
    # age limit is lifted; everything else is the shipped default schedule.
    return settings.model_copy(
        update={
            "dream_interval_seconds": INTERVAL,
            "warmup_seconds": WARMUP,
            "backoff_base_seconds": 60,
            "backoff_cap_seconds": 1800,
            "min_rounds": 1,
            "quiet_period_seconds": 0,
            "max_age_days": 3650,
        }
    )


def _agent_events(rng: random.Random, start) -> list[tuple]:
    """(time, order, kind, payload): messages every TRICKLE, requests spanning some slots."""
    events, n = [], 0
    end = start + timedelta(hours=HOURS - 5)  # the last slot picks up every message
    at = start + timedelta(seconds=30)
    while at < end:
        for u in range(USERS):
            day = int((at - start).total_seconds() // 86400)
            n += 1
            line = rng.choice(["I prefer item {n}.", "I work on item {n} today.", "I need item {n} for my build."])
            events.append((at, 0, "message", (f"u{u}", f"u{u}-day{day}", line.format(n=f"{n:05d}"))))
        at += timedelta(seconds=TRICKLE)
    slot = start + timedelta(seconds=WARMUP)
    while slot < start + timedelta(hours=HOURS):
        if rng.random() < BUSY_SHARE:
            begin = slot - timedelta(seconds=30)
            events.append((begin, 1, "begin", None))
            events.append((slot + timedelta(seconds=rng.randrange(90, 50 * 60)), 1, "end", None))
        slot += timedelta(seconds=INTERVAL)
    return events


def _run_simulation(daemon: DreamScheduler, clock: Clock, busy: SqlBusySignal, engine, rng) -> dict:
    start = clock.now
    queue: list[tuple] = [
        (at, order, i, kind, payload) for i, (at, order, kind, payload) in enumerate(_agent_events(rng, start))
    ]
    slots = [start + timedelta(seconds=WARMUP + k * INTERVAL) for k in range(HOURS * 3600 // INTERVAL + 1)]
    slots = [s for s in slots if s < start + timedelta(hours=HOURS)]
    queue += [(s, 2, -k - 1, "fire", None) for k, s in enumerate(slots)]
    heapq.heapify(queue)
    tally, retry, runs, sent = Counter(), None, [], Counter()
    retry_keys = itertools.count(len(queue))  # unique: above every other event's key
    while queue:
        at, _order, key, kind, payload = heapq.heappop(queue)
        clock.now = at
        if kind == "message":
            user, session, text = payload
            append_messages(
                engine,
                session,
                [{"role": "user", "content": text}, {"role": "assistant", "content": f"noted ({text[-10:-1]})"}],
                user_id=user,
            )
            sent[text] = 0
        elif kind in ("begin", "end"):
            for u in range(USERS):  # the agent serves both users: each one's requests in flight
                getattr(busy, kind)(activity_key(f"u{u}"))
        elif kind == "fire" and (key < 0 or key == retry):
            action = daemon.tick()
            tally[action.kind] += 1
            if action.kind == BACKOFF:
                retry = next(retry_keys)
                heapq.heappush(queue, (action.at, 2, retry, "fire", None))
            elif action.kind == RUN:
                retry = None  # the shell removes its pending retry job when a pass starts
                runs.append(at)
    return {"tally": tally, "runs": runs, "slots": slots, "messages": sent}


def test_a_daemon_left_for_1000_simulated_hours_makes_one_pass_per_interval(
    settings, sqlite_engine, server, tmp_path, figures
):
    clock, rng = Clock(), random.Random(1000)
    busy = SqlBusySignal(sqlite_engine, window_seconds=60)
    rt = kit.runtime(_settings(settings), sqlite_engine, server, tmp_path, busy=busy)
    try:
        daemon = DreamScheduler(rt, InlineExecutor(rt, clock=clock), clock=clock, rand=rng.random)
        out = _run_simulation(daemon, clock, busy, sqlite_engine, rng)
    finally:
        rt.close()

    runs, slots, tally = out["runs"], out["slots"], out["tally"]
    per_interval = Counter(sum(1 for s in slots if s <= r) for r in runs)
    with session_scope(sqlite_engine) as s:
        rows = Counter(r.status for r in s.exec(select(DreamRun)))
        behind = s.exec(
            select(Session.external_id)
            .join(Cursor, Cursor.session_id == Session.id)
            .where(Cursor.processed_seq != Session.last_seq)
        ).all()
    extracted = Counter()
    for r in server.requests:
        if r["path"].endswith("/chat/completions") and not is_judgement(r["body"]):
            extracted.update(
                text for _seq, role, context, text in transcript_lines(r["body"]) if role == "user" and not context
            )
    messages = out["messages"]
    sent_once = sum(1 for text in messages if extracted[text] == 1)
    figures(
        "daemon: simulated hours / regular slots / passes run",
        f"{HOURS} h / {len(slots)} / {len(runs)}",
        f"{tally[BACKOFF]} busy backoffs, {len(runs) - len(slots)} extra passes",
    )
    figures(
        "daemon: messages sent to the model exactly once",
        f"{sent_once} of {len(messages)}",
        f"{sum(extracted.values())} user lines in {sum(1 for r in server.requests if 'chat' in r['path'])} chat requests",
    )

    assert len(slots) == 250
    assert len(runs) == len(slots)
    assert per_interval == Counter({k: 1 for k in range(1, len(slots) + 1)})
    assert tally[BACKOFF] > 0 and rows == Counter({"ok": len(runs), "skipped_busy": tally[BACKOFF]})
    assert set(extracted) == set(messages)
    assert sent_once == len(messages) == 1990  # one an hour for 995 h, for each of 2 users
    assert behind == []
