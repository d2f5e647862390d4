"""The calendar's edge: times whose day some time zone cannot tell are refused by every importer
and by the API's schema; sessions a store already holds with such a time (written straight into
SQL) fail alone, are quarantined after `max_attempts`, and every other session is dreamed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from dreamkit import extraction_script
from pydantic import ValidationError
from sqlalchemy import update
from sqlmodel import select

from dreamer.core.models import Cursor, Memory, Message
from dreamer.engine.dream import dream_pass
from dreamer.ingest.files import ingest_file
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.schemas import MessageIn
from dreamer.store.db import session_scope

from . import kit

pytestmark = pytest.mark.reliability

EDGES = [  # each within a day of the calendar's edge, written as clients write times
    "9999-12-31T23:30:00Z",
    "9999-12-31T00:00:00Z",
    "9999-12-31",
    "9999-12-31T12:00:00+05:00",
    "9999-12-31T00:00:01-10:00",
    "0001-01-01T00:10:00Z",
    "0001-01-01T23:59:59Z",
    "0001-01-01",
    "0001-01-01T20:00:00-02:00",
    "0001-01-02T05:00:00+06:00",
]
KEPT = ["9999-12-30T23:59:59Z", "0001-01-02T00:00:00Z", "2024-05-01T12:00:00+14:00", "1970-01-01T00:00:00Z"]


def refused_by_importers(engine, tmp_path, when: str) -> int:
    """How many of the importers (OpenAI JSONL, Claude Code, OpenClaw) reject a line at `when`."""
    files = {
        "openai": [{"role": "user", "content": "hi", "created_at": when}],
        "claude-code": [
            {"sessionId": "c", "type": "user", "timestamp": when, "message": {"role": "user", "content": "hi"}}
        ],
        "openclaw": [
            {"type": "session", "id": "o", "timestamp": "2024-05-01T00:00:00Z"},
            {"type": "message", "timestamp": when, "message": {"role": "user", "content": "hi"}},
        ],
    }
    refused = 0
    for fmt, lines in files.items():
        path = tmp_path / f"{fmt}-{abs(hash(when))}.jsonl"
        path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        report = ingest_file(engine, path, fmt=fmt, user_id="edgy")
        refused += int(report.added == 0 and any("calendar's edge" in r.reason for r in report.rejections))
    return refused


def refused_by_the_api(when: str) -> bool:
    try:
        MessageIn.model_validate({"role": "user", "content": "hi", "created_at": when})
    except ValidationError as exc:
        return [e["loc"] for e in exc.errors()] == [("created_at",)]
    return False


def test_every_time_at_the_edge_is_refused_and_the_others_kept(sqlite_engine, tmp_path, figures):
    tried = len(EDGES) * 4
    refused = sum(refused_by_importers(sqlite_engine, tmp_path, w) + refused_by_the_api(w) for w in EDGES)
    kept = sum(3 - refused_by_importers(sqlite_engine, tmp_path, w) + (not refused_by_the_api(w)) for w in KEPT)
    figures(
        "calendar edge: times tried / refused", f"{tried} / {refused}", f"{kept} of {len(KEPT) * 4} near the edge kept"
    )
    assert (refused, kept) == (tried, len(KEPT) * 4)


def test_poisoned_sessions_fail_alone_and_the_others_are_dreamed(settings, sqlite_engine, tmp_path, figures):
    with ScriptedServer(embed_dim=kit.DIM) as server:
        server.set_script(extraction_script())
        st = settings.model_copy(update={"timezone": "Europe/Oslo", "min_rounds": 1, "max_sessions_per_pass": 100})
        rt = kit.runtime(st, sqlite_engine, server, tmp_path)
        try:
            poisoned, others = [], []
            for u in range(6):
                for n in range(3):
                    rec = record_messages(
                        rt.engine, f"s{n}", kit.session_with(f"I prefer topic {u}-{n}."), user_id=f"user{u}"
                    )
                    (poisoned if u < 3 and n == 1 else others).append(rec.session_id)
            with session_scope(rt.engine) as s:
                for seq, sid in zip((1, 4, 8), poisoned):  # the first, a middle and the last message
                    stmt = update(Message).where(Message.session_id == sid, Message.seq == seq)
                    s.exec(stmt.values(created_at=datetime(9999, 12, 31, 23, 30, tzinfo=UTC)))
            runs = [dream_pass(rt) for _ in range(st.max_attempts + 1)]
            with session_scope(rt.engine) as s:
                cursors = {c.session_id: c for c in s.exec(select(Cursor)).all()}
                remembered = {m.evidence[0]["session_id"] for m in s.exec(select(Memory)).all()}
        finally:
            rt.close()
    dreamed_first = runs[0].sessions
    quarantined = sum(cursors[sid].status == "quarantined" for sid in poisoned)
    figures(
        "poisoned sessions vs others dreamed",
        f"{len(poisoned)} poisoned / {dreamed_first} of {len(others)} others dreamed in the first pass",
        f"{quarantined} quarantined after {st.max_attempts} passes; runs {[r.status for r in runs]}",
    )
    assert [r.status for r in runs] == ["partial", "partial", "partial", "ok"]
    assert (dreamed_first, runs[0].failed_sessions) == (len(others), len(poisoned))
    assert remembered == set(others)
    assert quarantined == len(poisoned) == 3
