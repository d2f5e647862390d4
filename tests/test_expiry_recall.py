"""Facts that expire, end to end: a pass and an agent write store until when a dated fact is
current (`valid_until`, from when it was said); recall and the context block serve it as any
other before that day, and after it label it past and rank it below every current fact. A
durable fact with a number in it is never labelled."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import httpx
import pytest
from dreamkit import EMBED_DIM, make_runtime
from onlinekit import ALICE_WRITER, LiveServer, bearer, online_runtime, online_settings
from sqlmodel import select

from dreamer.core.expiry import end_of_day
from dreamer.core.models import Memory
from dreamer.core.scope import Scope
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.engine.records.revert import revert_run
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.base import ParsedMessage
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.agent_writes import remember
from dreamer.online.api import create_app
from dreamer.online.recall import context, recall
from dreamer.store import cabinet, gate
from dreamer.store.db import session_scope

ALICE = Scope("alice")
SAID = datetime(2027, 2, 10, 9, 0, tzinfo=UTC)  # a Wednesday
BEFORE = datetime(2027, 2, 16, 20, 0, tzinfo=UTC)  # the Tuesday itself
AFTER = datetime(2027, 2, 17, 8, 0, tzinfo=UTC)
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


def test_a_fact_said_again_later_stays_current_until_the_later_day_and_a_revert_restores_it(rt):
    dreamed(rt)
    record_messages(
        rt.engine, "s2", said(SAID + timedelta(days=7), "I have a job interview at Acme next Tuesday."), user_id="alice"
    )
    run = dream_pass(rt, force=True, judge=None)
    assert run.merged >= 1
    with session_scope(rt.engine) as s:
        [m] = s.exec(select(Memory).where(Memory.text == INTERVIEW)).all()
        assert as_utc(m.valid_until) == end_of_day(date(2027, 2, 23))  # a week on: the Tuesday after
    assert revert_run(rt.engine, run.id).applied
    with session_scope(rt.engine) as s:
        [m] = s.exec(select(Memory).where(Memory.text == INTERVIEW)).all()
        assert as_utc(m.valid_until) == end_of_day(date(2027, 2, 16))


def test_before_its_day_a_dated_fact_is_served_as_current(rt):
    dreamed(rt)
    found = recall(rt, "job interview at Acme", ALICE, k=3, now=BEFORE)
    assert [h.text for h in found.hits][0] == INTERVIEW
    assert not any(h.past for h in found.hits)
    first = found.as_json()["hits"][0]
    assert (first["past"], first["valid_until"]) == (False, "2027-02-16T23:59:59+00:00")


def test_after_its_day_a_dated_fact_is_past_and_below_every_current_fact(rt):
    dreamed(rt)
    found = recall(rt, "job interview at Acme", ALICE, k=3, now=AFTER)
    assert [h.text for h in found.hits][-1] == INTERVIEW
    assert [(h.text, h.past) for h in found.hits if h.past] == [(INTERVIEW, True)]
    assert [h.rank for h in found.hits] == [1, 2, 3]
    assert found.as_json()["hits"][-1]["past"] is True


def test_a_recall_about_what_happened_labels_but_keeps_the_order(rt):
    dreamed(rt)
    before = recall(rt, "job interview at Acme", ALICE, k=3, now=BEFORE)
    history = recall(rt, "job interview at Acme", ALICE, k=3, now=AFTER, past_last=False)
    assert [h.memory_id for h in history.hits] == [h.memory_id for h in before.hits]
    assert [h.past for h in history.hits] == [h.text == INTERVIEW for h in before.hits]


def test_a_past_fact_never_takes_the_place_of_a_current_one(rt):
    dreamed(rt)
    [first] = recall(rt, "job interview at Acme", ALICE, k=1, now=BEFORE).hits
    assert first.text == INTERVIEW
    [only] = recall(rt, "job interview at Acme", ALICE, k=1, now=AFTER).hits
    assert only.text != INTERVIEW and not only.past


def test_the_context_block_labels_a_past_fact_and_puts_it_last(rt):
    dreamed(rt)
    before = context(rt, ALICE, budget_tokens=500, now=BEFORE).text.splitlines()[1:-1]
    after = context(rt, ALICE, budget_tokens=500, now=AFTER).text.splitlines()[1:-1]
    assert f"- {INTERVIEW}" in before and not any("past:" in line for line in before)
    assert after[-1] == f"- {INTERVIEW} (past: 2027-02-16)"
    assert [line for line in after if "past:" in line] == [after[-1]]
    assert any(line.startswith(f"- {KIDS}") for line in after)  # a number that is no date: never past


def test_a_far_later_recall_still_labels_only_the_dated_fact(rt):
    dreamed(rt)
    later = datetime(2031, 1, 1, tzinfo=UTC)
    found = recall(rt, "Acme kids Tuesdays", ALICE, k=5, now=later)
    assert {h.text: h.past for h in found.hits} == {INTERVIEW: True, DESIGNER: False, KIDS: False}


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
        return gate.memory_row(user_id="alice", kind=kind, text=text, source="dream", evidence=[], now=late, tz=oslo)

    assert row(INTERVIEW)["valid_until"] == datetime(2027, 2, 16, 22, 59, 59, tzinfo=UTC)  # Tuesday's end in Oslo
    assert row("The user's flight is tomorrow.")["valid_until"] == datetime(2027, 2, 12, 22, 59, 59, tzinfo=UTC)
    assert row("The user's flight is tomorrow.", kind="daily_note")["valid_until"] is None


def test_the_http_answers_say_when_a_fact_is_past(settings, sqlite_engine, tmp_path):
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(online_settings(settings), sqlite_engine, scripted, EdgeIndex(tmp_path / "edge", EMBED_DIM))
        try:
            with session_scope(rt.engine) as s:  # said a year ago: its Tuesday is long over
                cabinet.add_memory(
                    s,
                    user_id="alice",
                    kind="profile",
                    text=INTERVIEW,
                    source="dream",
                    evidence=[],
                    now=SAID - timedelta(days=365),
                )
            outbox.drain(rt)
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as client:
                h = bearer(ALICE_WRITER)
                durable = client.post("/v1/memories", headers=h, json={"text": DESIGNER, "kind": "profile"}).json()
                soon = client.post(
                    "/v1/memories",
                    headers=h,
                    json={"text": "The user has a dentist appointment tomorrow.", "kind": "profile"},
                ).json()
                hits = client.post("/v1/recall", headers=h, json={"query": "job interview at Acme", "k": 3}).json()[
                    "hits"
                ]
                block = client.get("/v1/context", headers=h, params={"budget": 500}).json()["text"]
        finally:
            rt.close()
    assert durable["valid_until"] is None
    assert soon["valid_until"] is not None and soon["valid_until"].endswith("T23:59:59+00:00")
    assert [(x["text"], x["past"], x["valid_until"]) for x in hits if x["past"]] == [
        (INTERVIEW, True, "2026-02-17T23:59:59+00:00")
    ]
    assert hits[-1]["text"] == INTERVIEW and [x["rank"] for x in hits] == [1, 2, 3]
    assert block.splitlines()[-2] == f"- {INTERVIEW} (past: 2026-02-17)"


def test_a_question_asked_after_a_duration_ends_gets_the_past_label(rt):
    """ "A gluten-free diet for the next two weeks", said on 10 February: current until the 24th;
    asked 33 days on, the diet is labelled past and no longer the first answer."""
    diet = "The user is on a gluten-free diet for the next two weeks."
    with session_scope(rt.engine) as s:
        rows = [
            gate.memory_row(user_id="alice", kind="profile", text=t, source="agent", evidence=[], now=SAID)
            for t in (diet, "The user avoids peanuts.")
        ]
        gate.insert_memories(s, rows, [])
    row = rows[0]
    outbox.drain(rt, users=["alice"])
    assert as_utc(row["valid_until"]) == end_of_day(date(2027, 2, 24))
    later = SAID + timedelta(days=33)
    found = recall(rt, "do I need to avoid any food right now? gluten-free diet", ALICE, k=2, now=later)
    assert [(h.text, h.past) for h in found.hits] == [("The user avoids peanuts.", False), (diet, True)]
