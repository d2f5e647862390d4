"""Times at the calendar's edge: a message whose day some time zone cannot tell (within a day of
0001-01-01 or 9999-12-31) is a rejected line at ingest and a 422 through the API, so it never
reaches a dream pass."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import httpx
import pytest
from clikit import assert_one_error_line, run
from dreamkit import EMBED_DIM
from onlinekit import ALICE_WRITER, LiveServer, bearer, online_runtime, online_settings
from sqlmodel import select

from dreamer.core.days import FIRST_TIME, LAST_TIME, day_problem, local_day
from dreamer.core.models import Message
from dreamer.core.settings import Settings
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.files import ingest_file
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import db
from dreamer.store.db import session_scope

KEPT = "its day cannot be told in every time zone (times from 0001-01-02 to 9999-12-30 UTC are kept)"
LATE = f"9999-12-31T23:30:00+00:00 is too close to the calendar's edge: {KEPT}"
EARLY = f"0001-01-01T00:10:00+00:00 is too close to the calendar's edge: {KEPT}"
EDGE_LINES = [  # the lines of the issue's example, and the same at the other end of the calendar
    {"role": "user", "content": "I prefer a calendar edge.", "created_at": "9999-12-31T23:30:00Z"},
    {"role": "user", "content": "ok 1"},
    {"role": "user", "content": "ok 2", "created_at": "0001-01-01T00:10:00Z"},
    {"role": "user", "content": "ok 3"},
]


def write_jsonl(path, lines) -> None:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")


def test_the_day_of_a_time_within_a_day_of_the_calendars_edge_cannot_be_told():
    assert day_problem(datetime(9999, 12, 31, 23, 30, tzinfo=UTC)) == LATE
    assert day_problem(datetime(1, 1, 1, 0, 10, tzinfo=UTC)) == EARLY
    assert day_problem(datetime(1, 1, 1, 0, 10)) == EARLY  # naive: UTC, as the store keeps times
    assert (day_problem(FIRST_TIME), day_problem(LAST_TIME)) == (None, None)
    assert day_problem(FIRST_TIME - timedelta(microseconds=1)) is not None
    assert day_problem(LAST_TIME + timedelta(microseconds=1)) is not None
    west = timezone(-timedelta(hours=23, minutes=59))
    east = timezone(timedelta(hours=23, minutes=59))
    assert local_day(FIRST_TIME, west) == datetime(1, 1, 1).date()
    assert local_day(LAST_TIME, east) == datetime(9999, 12, 31).date()


def test_local_day_says_which_time_it_cannot_place():
    with pytest.raises(ValueError) as caught:
        local_day(datetime(9999, 12, 31, 23, 30, tzinfo=UTC), ZoneInfo("Europe/Oslo"))
    assert str(caught.value) == LATE
    with pytest.raises(ValueError) as caught:
        local_day(datetime(1, 1, 1, 0, 10, tzinfo=UTC), ZoneInfo("America/New_York"))
    assert str(caught.value) == EARLY


def test_ingest_rejects_the_line_and_keeps_the_others(engine, tmp_path):
    path = tmp_path / "edge.jsonl"
    write_jsonl(path, EDGE_LINES)

    report = ingest_file(engine, path, user_id="edgy")

    assert report.rejection_lines() == [f"rejected {path}:1: its time {LATE}", f"rejected {path}:3: its time {EARLY}"]
    with session_scope(engine) as s:
        assert [m.content for m in s.exec(select(Message).order_by(Message.seq)).all()] == ["ok 1", "ok 3"]


def test_claude_code_and_locomo_times_at_the_edge_are_rejected(engine, tmp_path):
    cc = tmp_path / "cc.jsonl"
    base = {"sessionId": "cc", "cwd": "/srv/app"}
    write_jsonl(
        cc,
        [
            {**base, "type": "user", "timestamp": "2024-05-01T10:00:00Z", "message": {"role": "user", "content": "a"}},
            {**base, "type": "user", "timestamp": "9999-12-31T23:30:00Z", "message": {"role": "user", "content": "b"}},
        ],
    )
    assert ingest_file(engine, cc, user_id="u").rejection_lines() == [f"rejected {cc}:2: its time {LATE}"]
    locomo = tmp_path / "locomo.json"
    turns = [{"speaker": "A", "dia_id": f"D1:{i}", "text": f"turn {i}"} for i in (1, 2)]
    conversation = {
        "speaker_a": "A",
        "speaker_b": "B",
        "session_1": turns,
        "session_1_date_time": "11:59 pm on 31 December, 9999",
    }
    locomo.write_text(json.dumps([{"sample_id": "s1", "conversation": conversation}]), encoding="utf-8")
    report = ingest_file(engine, locomo, fmt="locomo", user_id=None)
    assert report.rejection_lines() == [  # each turn a second after the one before
        f"rejected {locomo}: conversation 1 (s1) session_1 turn {n}: its time 9999-12-31T23:59:0{n - 1}+00:00"
        f" is too close to the calendar's edge: {KEPT}"
        for n in (1, 2)
    ]
    assert report.sessions == []


def test_the_issues_example_ingests_three_lines_and_the_pass_runs(tmp_path):
    """`dreamer ingest` names the line it refused; the dream pass in Europe/Oslo then runs."""
    write_jsonl(tmp_path / "edge.jsonl", [EDGE_LINES[0], *({"role": "user", "content": f"ok {n}"} for n in (1, 2, 3))])
    assert run(tmp_path, "init").returncode == 0

    ingest = run(tmp_path, "ingest", "edge.jsonl", "--user", "edgy")
    dream = run(tmp_path, "dream", env={"DREAMER_TIMEZONE": "Europe/Oslo"})

    assert ingest.returncode == 1
    assert ingest.stderr.splitlines() == [f"rejected edge.jsonl:1: its time {LATE}"]
    assert (dream.returncode, dream.stderr) == (0, "")


def test_a_flush_of_a_stored_time_at_the_edge_is_one_line(tmp_path):
    """A store written before the check may hold such a time: `dreamer flush` says so in one line."""
    write_jsonl(tmp_path / "c.jsonl", [{"role": "user", "content": "I prefer tea."}, {"role": "user", "content": "ok"}])
    assert run(tmp_path, "ingest", "c.jsonl", "--user", "edgy").returncode == 0
    with sqlite3.connect(tmp_path / "data" / "dreamer.db") as con:
        con.execute("UPDATE messages SET created_at = '9999-12-31 23:30:00.000000' WHERE seq = 1")

    flush = run(tmp_path, "flush", "--session", "1", env={"DREAMER_TIMEZONE": "Europe/Oslo"})

    assert_one_error_line(flush)
    assert flush.stderr.strip() == f"error: {LATE}"


@pytest.fixture
def client(tmp_path):
    settings = online_settings(Settings(_env_file=None, data_dir=tmp_path / "data"))
    engine = db.make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    db.upgrade(engine)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(settings, engine, scripted, EdgeIndex(tmp_path / "edge", EMBED_DIM), llm=False)
        try:
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as c:
                c.headers.update(bearer(ALICE_WRITER))
                yield c, engine
        finally:
            rt.close()
            engine.dispose()


def test_the_api_refuses_a_message_time_at_the_edge_with_a_422_naming_it(client):
    c, engine = client
    said = "2024-05-01T12:00:00Z"
    for when, problem in (("9999-12-31T23:30:00Z", LATE), ("0001-01-01T00:10:00Z", EARLY)):
        r = c.post(
            "/v1/sessions/s1/messages", json={"messages": [{"role": "user", "content": "hi", "created_at": when}]}
        )
        [error] = r.json()["detail"]
        assert (r.status_code, error["loc"], error["msg"]) == (
            422,
            ["body", "messages", 0, "created_at"],
            f"Value error, {problem}",
        )
    ok = c.post("/v1/sessions/s1/messages", json={"messages": [{"role": "user", "content": "hi", "created_at": said}]})
    assert ok.status_code == 200
    with session_scope(engine) as s:
        [stored] = s.exec(select(Message)).all()
    assert stored.created_at.replace(tzinfo=UTC) == datetime(2024, 5, 1, 12, tzinfo=UTC)
