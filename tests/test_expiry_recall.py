"""Facts that expire, end to end: a pass and an agent write store until when a dated fact is
current (`valid_until`, from when it was said); recall and the context block serve it as any
other before that day, and after it label it past and rank it below every current fact. A
durable fact with a number in it is never labelled."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from dreamkit import EMBED_DIM, make_runtime
from sqlmodel import select

from dreamer.core.expiry import end_of_day
from dreamer.core.models import Memory
from dreamer.core.scope import Scope
from dreamer.engine.dream import dream_pass
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.base import ParsedMessage
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted import Reply, ScriptedServer
from dreamer.online.agent_writes import remember
from dreamer.store import cabinet
from dreamer.store.db import session_scope

ALICE = Scope("alice")
SAID = datetime(2027, 2, 10, 9, 0, tzinfo=UTC)  # a Wednesday
INTERVIEW = "The user has a job interview at Acme next Tuesday."
DESIGNER = "The user works at Acme as a designer."
KIDS = "The user has 2 kids and runs 5k on Tuesdays."


def extracted(body: dict) -> Reply:
    """The three facts the transcript says, each resting on its own line."""
    return Reply.json(
        {
            "profile": [
                {"text": INTERVIEW, "seqs": [1], "importance": 0.6},
                {"text": DESIGNER, "seqs": [3], "importance": 0.6},
                {"text": KIDS, "seqs": [5], "importance": 0.6},
            ]
        }
    )


@pytest.fixture
def rt(settings, sqlite_engine, tmp_path):
    with ScriptedServer(embed_dim=EMBED_DIM) as server:
        server.set_script(extracted)
        runtime = make_runtime(
            settings.model_copy(update={"min_rounds": 1}),
            sqlite_engine,
            server,
            EdgeIndex(tmp_path / "edge", EMBED_DIM),
        )
        yield runtime
        runtime.close()


def said(at: datetime, *lines: str) -> list[ParsedMessage]:
    out = []
    for i, line in enumerate(lines):
        out.append(ParsedMessage("user", line, created_at=at + timedelta(minutes=2 * i)))
        out.append(ParsedMessage("assistant", "Noted.", created_at=at + timedelta(minutes=2 * i + 1)))
    return out


def dreamed(rt) -> dict[str, Memory]:
    transcript = said(
        SAID,
        "I have a job interview at Acme next Tuesday.",
        "I work at Acme as a designer.",
        "I have 2 kids and I run 5k on Tuesdays.",
    )
    record_messages(rt.engine, "s1", transcript, user_id="alice")
    dream_pass(rt, force=True, judge=None)
    with session_scope(rt.engine) as s:
        return {m.text: m for m in s.exec(select(Memory)).all()}


def as_utc(at: datetime | None) -> datetime | None:
    return at.replace(tzinfo=UTC) if at is not None and at.tzinfo is None else at


def test_a_pass_stores_until_when_a_dated_fact_is_current(rt):
    stored = dreamed(rt)
    assert set(stored) == {INTERVIEW, DESIGNER, KIDS}
    assert as_utc(stored[INTERVIEW].valid_until) == end_of_day(date(2027, 2, 16))  # next Tuesday, from 10 February
    assert stored[DESIGNER].valid_until is None
    assert stored[KIDS].valid_until is None


def test_an_agent_write_is_current_until_the_day_it_names(rt):
    written = remember(rt, ALICE, "The user has a dentist appointment tomorrow.", kind="profile")
    m = written.memory
    assert as_utc(m.valid_until) == end_of_day(as_utc(m.valid_from).date() + timedelta(days=1))
    durable = remember(rt, ALICE, "The user lives at 15 Main St.", kind="profile").memory
    assert durable.valid_until is None


def test_the_day_is_counted_in_the_users_time_zone_and_a_daily_note_never_expires(settings):
    oslo = settings.model_copy(update={"timezone": "Europe/Oslo"}).tz
    late = datetime(2027, 2, 10, 23, 30, tzinfo=UTC)  # already Thursday the 11th in Oslo

    def row(text: str, kind: str = "profile") -> dict:
        return cabinet.memory_row(user_id="alice", kind=kind, text=text, source="dream", evidence=[], now=late, tz=oslo)

    assert row(INTERVIEW)["valid_until"] == datetime(2027, 2, 16, 22, 59, 59, tzinfo=UTC)  # Tuesday's end in Oslo
    assert row("The user's flight is tomorrow.")["valid_until"] == datetime(2027, 2, 12, 22, 59, 59, tzinfo=UTC)
    assert row("The user's flight is tomorrow.", kind="daily_note")["valid_until"] is None
