"""The API keeps answering while a pass runs: 200 concurrent requests against a real uvicorn
server, in the process that also runs the dream pass over the same store and Qdrant Edge index
(the `dreamer serve` shape on the embedded default). The scripted model holds the pass inside
its third extraction call until every request has been answered, so the whole burst provably
lands while the pass is running; then the pass must finish cleanly."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from dreamkit import EMBED_DIM, extraction_script, is_judgement
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER, LiveServer, bearer, chat, online_runtime, online_settings
from sqlmodel import select

from dreamer.core.models import Cursor, Memory, Session
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store.db import session_scope

from . import kit

pytestmark = pytest.mark.reliability

CONCURRENT = 200
SESSIONS = 10  # one pass takes at most `max_sessions_per_pass` (10)
LIKES = [
    "green tea",
    "aisle seats",
    "dark mode",
    "vinyl records",
    "early flights",
    "oat milk",
    "mechanical keyboards",
    "rainy walks",
    "jazz piano",
    "paper maps",
]


def _requests() -> list[dict]:
    """The burst: every kind of call an agent makes."""
    out = []
    for i in range(CONCURRENT):
        kind = i % 8
        if kind in (0, 1):
            out.append(("POST", "/v1/recall", ALICE_READER, {"query": f"which tea does the user prefer {i}", "k": 5}))
        elif kind == 2:
            out.append(("GET", "/v1/context?budget=300", ALICE_READER, None))
        elif kind in (3, 4):
            out.append(
                (
                    "POST",
                    f"/v1/sessions/live-{i}/messages",
                    ALICE_WRITER,
                    {"messages": chat(f"I prefer notebook number {i}.", "noted")},
                )
            )
        elif kind == 5:
            out.append(
                ("POST", "/v1/memories", BOB_WRITER, {"text": f"The user owns bicycle number {i}.", "kind": "profile"})
            )
        elif kind == 6:
            out.append(("GET", "/v1/status", ALICE_READER, None))
        else:
            out.append(("GET", "/healthz", ALICE_READER, None))
    return [{"method": m, "path": p, "headers": bearer(t), "body": b} for m, p, t, b in out]


def burst(url: str) -> list[dict]:
    """The requests, all at once, from a separate process: clients never share the server's interpreter."""
    tests = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-m", "reliability.burst_child", url],
        input=json.dumps(_requests()),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _held_script(release: threading.Event, holding: threading.Event):
    script = extraction_script()
    calls = {"n": 0}

    def answer(body):
        if not is_judgement(body):
            calls["n"] += 1
            if calls["n"] == 3:
                holding.set()
                release.wait(120)
        return script(body)

    return answer


def test_the_api_keeps_answering_200_concurrent_requests_while_a_pass_runs(engine, settings, tmp_path, figures):
    st = online_settings(settings, min_rounds=1, busy_window_seconds=60, sessions_per_call=1)  # a call per session
    release, holding = threading.Event(), threading.Event()
    with ScriptedServer(embed_dim=EMBED_DIM) as server:
        server.set_script(_held_script(release, holding))
        rt = online_runtime(st, engine, server, EdgeIndex(tmp_path / "edge", EMBED_DIM))
        for i in range(SESSIONS):
            record_messages(engine, f"old-{i}", kit.session_with(f"I prefer {LIKES[i]}."), user_id="alice")
        run: dict = {}
        passing = threading.Thread(target=lambda: run.update(row=dream_pass(rt, force=True)), daemon=True)
        try:
            with LiveServer(create_app(rt)) as live:
                passing.start()
                assert holding.wait(60), "the pass never reached its third extraction call"
                results = burst(live.url)
                still_running = passing.is_alive()
                release.set()
                passing.join(120)
            drift = outbox.check(rt)
        finally:
            release.set()
            rt.close()

    codes = [r["status"] for r in results]
    times = sorted(r["ms"] for r in results)
    p50, p95 = statistics.median(times), times[int(0.95 * len(times)) - 1]
    figures(
        f"API under {CONCURRENT} concurrent requests during a pass ({engine.dialect.name})",
        f"{codes.count(200)} of {CONCURRENT} answered 200, p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {times[-1]:.0f} ms",
    )
    assert still_running
    assert codes == [200] * CONCURRENT, sorted({(r["status"], r["path"]) for r in results})
    row = run["row"]
    assert (row.status, row.sessions, row.error) == ("ok", SESSIONS, None)
    with session_scope(engine) as s:
        behind = s.exec(
            select(Session.external_id)
            .join(Cursor, Cursor.session_id == Session.id)
            .where(Session.external_id.like("old-%"))
            .where(Cursor.processed_seq != Session.last_seq)
        ).all()
        texts = {m.text for m in s.exec(select(Memory))}
        stored = set(s.exec(select(Memory.id)).all())
    remembered = {r["body"]["memory_id"] for r in results if r["path"] == "/v1/memories"}
    assert behind == []
    assert {f"The user prefers {like}." for like in LIKES} <= texts
    assert len(remembered) >= 1 and remembered <= stored
    assert drift.clean, drift
