"""The context meter and the daily-note flush: exact trigger points, once per cycle, off the
request path, never twice per window, the rules extractor without an LLM, the daily file."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime

import httpx
import pytest
from dreamkit import ManualClock, chat_bodies, make_index
from onlinekit import ALICE_WRITER, LiveServer, bearer, chat, online_runtime, online_settings
from sqlmodel import select
from typer.testing import CliRunner

from dreamer.core.days import day_words
from dreamer.core.errors import ConfigError, IngestError
from dreamer.core.models import DailyNote, Memory, Message
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.core.tokens import count_tokens
from dreamer.engine.markdown import views as markdown
from dreamer.llm.bill import prompt_tokens_of
from dreamer.llm.breaker import Breaker
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.flush.notes import flush_session
from dreamer.online.flush.runner import FlushRunner
from dreamer.online.flush.trigger import (
    compaction_point,
    flush_due,
    flush_point,
    flush_trigger,
    validate_flush_settings,
    with_marks,
)
from dreamer.online.session_append import append
from dreamer.store import leases
from dreamer.store.db import session_scope
from dreamer.store.user_locks import UserLocked, lock_name

SMALL = {"context_window": 1000, "reserve_floor": 200, "soft_threshold": 100, "flush_every_messages": 50}
ALICE = Scope(user_id="alice")


def small(**over) -> Settings:
    return Settings(_env_file=None, **{**SMALL, **over})


# --------------------------------------------------------------------------- pure policy


def test_the_flush_point_is_the_formula():
    st = small()
    assert flush_point(st) == 1000 - 200 - 100 == 700
    assert compaction_point(st) == 800
    assert flush_point(Settings(_env_file=None)) == 128_000 - 20_000 - 4_000


@pytest.mark.parametrize(
    ("tokens", "since", "flushed", "expected"),
    [
        (699, 10, False, None),  # one token before the point
        (700, 10, False, "tokens"),  # at the point
        (950, 10, False, "tokens"),
        (700, 10, True, None),  # the cycle's token flush ran already
        (700, 0, False, None),  # nothing new since the last flush
        (10, 49, True, None),
        (10, 50, True, "messages"),  # every flush_every_messages, whatever the cycle
        (10, 50, False, "messages"),
    ],
)
def test_flush_trigger(tokens, since, flushed, expected):
    assert flush_trigger(tokens, since, flushed, small()) == expected
    assert flush_due(tokens, since, flushed, small()) is (expected is not None)


@pytest.mark.parametrize(
    ("over", "problem"),
    [
        ({"soft_threshold": 0}, "below the compaction point"),  # at the compaction point
        ({"soft_threshold": -50}, "below the compaction point"),  # above it
        ({"soft_threshold": 800}, "must be positive"),  # flush point 0
        ({"reserve_floor": 1000}, "must be positive"),
        ({"flush_every_messages": 0}, "flush_every_messages"),
    ],
)
def test_bad_flush_settings_are_refused(over, problem):
    with pytest.raises(ConfigError, match=problem):
        validate_flush_settings(small(**over))


def test_defaults_and_small_settings_are_accepted():
    validate_flush_settings(Settings(_env_file=None))
    validate_flush_settings(small())


def test_marks_ride_on_the_batch_and_client_marks_are_dropped():
    msgs = [
        {"role": "user", "content": "a", "meta": {"meter": {"compacted": True}, "x": 1}},
        {"role": "assistant", "content": "b"},
    ]
    marked = with_marks(msgs, context_tokens=42, compacted=False)
    assert marked == [
        {"role": "user", "content": "a", "meta": {"x": 1}},
        {"role": "assistant", "content": "b", "meta": {"meter": {"context_tokens": 42}}},
    ]
    assert with_marks(msgs[1:], context_tokens=None, compacted=True)[0]["meta"] == {"meter": {"compacted": True}}


# --------------------------------------------------------------------------- with a store


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        yield srv


@pytest.fixture
def make_rt(settings, sqlite_engine, server, tmp_path):
    made = []

    def build(*, llm: bool = True, **over):
        st = online_settings(settings, **{**SMALL, **over})
        rt = online_runtime(st, sqlite_engine, server, make_index("edge", tmp_path / f"i{len(made)}"), llm=llm)
        made.append(rt)
        return rt

    yield build
    for rt in made:
        rt.close()


def windows(rt) -> list[tuple[int, int, int, str]]:
    """(start, end, cycle, trigger) of each flush window."""
    with session_scope(rt.engine) as s:
        rows = s.exec(select(DailyNote).where(DailyNote.position == -1).order_by(DailyNote.id)).all()
    return [(r.window_start_seq, r.window_end_seq, r.cycle, r.text) for r in rows]


def notes(rt) -> list[DailyNote]:
    with session_scope(rt.engine) as s:
        return list(s.exec(select(DailyNote).where(DailyNote.position >= 0).order_by(DailyNote.id)).all())


def notes_reply(*texts: str, seqs=(1,)) -> Reply:
    return Reply.json({"notes": [{"text": t, "seqs": list(seqs)} for t in texts]})


def test_the_meter_counts_stored_tokens_then_takes_the_agents_figure(make_rt):
    rt = make_rt(llm=False)
    texts = ["Let us plan the trip to Lisbon in May.", "Sure, which dates work for you?"]
    meter = append(rt, ALICE, "s1", chat(*texts))
    assert meter.tokens == sum(count_tokens(t) for t in texts)
    assert (meter.cycle, meter.last_seq, meter.flushed_seq, meter.flush_point) == (0, 2, 0, 700)
    meter = append(rt, ALICE, "s1", chat("ok"), context_tokens=650)
    assert meter.tokens == 650
    meter = append(rt, ALICE, "s1", [{"role": "assistant", "content": "Noted, flights next."}])
    assert meter.tokens == 650 + count_tokens("Noted, flights next.")
    meter = append(rt, ALICE, "s1", [], context_tokens=20)  # a figure alone is used, not stored
    assert (meter.tokens, meter.last_seq) == (20, 4)
    assert append(rt, ALICE, "s1", []).tokens == 650 + count_tokens("Noted, flights next.")


def test_the_meter_is_read_in_one_statement_that_reads_no_message(make_rt):
    """The session row (its running state) and its flush windows, however long the session is."""
    from sqlalchemy import event

    from dreamer.online.flush.trigger import read_meter

    rt = make_rt(llm=False)
    meter = append(rt, ALICE, "s1", chat(*[f"message {n}" for n in range(40)]), context_tokens=500)
    statements: list[str] = []
    event.listen(rt.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))

    again = read_meter(rt, meter.session_id)

    assert (again.tokens, again.last_seq, len(statements)) == (500, 40, 1)
    assert "messages" not in statements[0]


def test_flush_fires_once_per_cycle_at_the_point_and_not_before(make_rt):
    rt = make_rt(llm=False)
    runner = FlushRunner(rt)
    try:
        first = append(rt, ALICE, "s1", chat("I prefer aisle seats."), context_tokens=699, runner=runner)
        assert (first.tokens, first.trigger, first.flush_scheduled) == (699, None, False)

        at_point = append(rt, ALICE, "s1", [{"role": "assistant", "content": "ok"}], runner=runner)
        assert count_tokens("ok") == 1
        assert (at_point.tokens, at_point.trigger, at_point.flush_scheduled) == (700, "tokens", True)
        assert runner.wait(30)
        assert windows(rt) == [(1, 2, 0, "tokens")]

        beyond = append(rt, ALICE, "s1", chat("I prefer tea."), context_tokens=790, runner=runner)
        assert (beyond.tokens, beyond.cycle_flushed, beyond.trigger, beyond.flush_scheduled) == (790, True, None, False)

        compacted = append(
            rt, ALICE, "s1", chat("Back to the trip."), compacted=True, context_tokens=100, runner=runner
        )
        assert (compacted.cycle, compacted.tokens, compacted.trigger) == (1, 100, None)

        again = append(rt, ALICE, "s1", chat("I prefer night trains."), context_tokens=700, runner=runner)
        assert (again.cycle, again.trigger, again.flush_scheduled) == (1, "tokens", True)
        assert runner.wait(30)
        assert windows(rt) == [(1, 2, 0, "tokens"), (3, 5, 1, "tokens")]
    finally:
        runner.close()


def test_meter_and_flush_on_both_stores(settings, engine, server, tmp_path):
    """SQLite and PostgreSQL: the marks in JSON meta, the sums, the window rows."""
    rt = online_runtime(online_settings(settings, **SMALL), engine, server, make_index("edge", tmp_path), llm=False)
    try:
        assert append(rt, ALICE, "s1", chat("I prefer aisle seats.", "ok"), context_tokens=690).tokens == 690
        meter = append(rt, ALICE, "s1", chat("I prefer tea."), compacted=True)
        assert (meter.cycle, meter.tokens) == (1, count_tokens("I prefer tea."))
        meter = append(rt, ALICE, "s1", chat("Noted, tea it is."), context_tokens=700)
        assert (meter.tokens, meter.trigger) == (700, "tokens")
        result = flush_session(rt, meter.session_id)
        assert (result.trigger, result.window, result.notes) == (
            "tokens",
            (1, 4),
            ["The user prefers aisle seats.", "The user prefers tea."],
        )
        assert windows(rt) == [(1, 4, 1, "tokens")]
        assert append(rt, ALICE, "s1", chat("more"), context_tokens=760).cycle_flushed is True
    finally:
        rt.close()


def test_the_message_trigger_fires_every_n_messages(make_rt):
    rt = make_rt(llm=False, flush_every_messages=4)
    assert append(rt, ALICE, "s1", chat("a", "b", "c")).trigger is None
    meter = append(rt, ALICE, "s1", chat("d"))
    assert (meter.messages_since_flush, meter.trigger) == (4, "messages")
    flush_session(rt, meter.session_id)
    assert append(rt, ALICE, "s1", chat("e")).trigger is None


def test_compacted_needs_its_first_messages(make_rt):
    rt = make_rt(llm=False)
    with pytest.raises(IngestError, match="compacted"):
        append(rt, ALICE, "s1", [], compacted=True)


def test_the_flush_runs_off_the_request_path(make_rt, server):
    """The append answers while the model has not answered the flush yet."""
    rt = make_rt()
    asked, release = threading.Event(), threading.Event()

    def script(body):
        asked.set()
        release.wait(30)
        return notes_reply("Alice is planning a Lisbon trip in May.")

    server.set_script(script)
    app = create_app(rt)
    try:
        with LiveServer(app) as live:
            r = httpx.post(
                f"{live.url}/v1/sessions/s1/messages",
                headers=bearer(ALICE_WRITER),
                timeout=30,
                json={"messages": chat("Plan Lisbon in May.", "Sure."), "context_tokens": 720},
            )
            assert r.status_code == 200
            assert (r.json()["tokens"], r.json()["flush_scheduled"]) == (720, True)
            assert not release.is_set()
            assert asked.wait(30)  # the model was asked in the background ...
            assert notes(rt) == []  # ... and nothing is written before it answers
            release.set()
            assert app.state.flusher.wait(30)
        assert [n.text for n in notes(rt)] == ["Alice is planning a Lisbon trip in May."]
    finally:
        release.set()


def test_the_runner_defers_flushes_while_the_model_keeps_failing(make_rt, server):
    rt = make_rt()
    clock = ManualClock()
    outcomes = []
    runner = FlushRunner(
        rt,
        breaker=Breaker(2, cooldown_seconds=300, clock=clock),
        on_done=lambda result, exc: outcomes.append(result.status if result else type(exc).__name__),
    )
    meter = append(rt, ALICE, "s1", chat("hello", "hi"))

    def flush_once():
        runner.schedule(meter.session_id, "manual")
        assert runner.wait(30)

    try:
        server.push(Reply.error(400), Reply.error(400))
        for _ in range(3):
            flush_once()
        assert outcomes == ["LLMError", "LLMError", "deferred"]
        assert len(chat_bodies(server)) == 2  # the third was not sent
        assert windows(rt) == []  # the window stays open
        runner.schedule(999_999, "manual")  # no such session: a deferred flush reads nothing to find out
        assert runner.wait(30) and outcomes[-1] == "deferred"

        clock.now += 300
        server.push(notes_reply("Alice said hello."))
        flush_once()
        assert outcomes[-1] == "flushed" and len(chat_bodies(server)) == 3
        assert windows(rt) == [(1, 2, 0, "manual")]
    finally:
        runner.close()


def test_a_window_never_flushes_twice(make_rt, server):
    rt = make_rt()
    server.push(notes_reply("Alice prefers aisle seats.", seqs=[1]))
    meter = append(rt, ALICE, "s1", chat("I prefer aisle seats.", "noted"))

    first = flush_session(rt, meter.session_id)
    second = flush_session(rt, meter.session_id)

    assert (first.status, first.window, first.notes) == ("flushed", (1, 2), ["Alice prefers aisle seats."])
    assert second.status == "nothing_new"
    assert len(chat_bodies(server)) == 1
    assert [(n.text, n.window_start_seq, n.window_end_seq) for n in notes(rt)] == [("Alice prefers aisle seats.", 1, 2)]


def test_two_concurrent_flushes_of_one_window_write_one_set(make_rt, server):
    rt = make_rt()
    both = threading.Barrier(2, timeout=30)

    def script(body):
        both.wait()  # both flushes have loaded the same window and asked the model
        return notes_reply("Alice flies to Lisbon.")

    server.set_script(script)
    meter = append(rt, ALICE, "s1", chat("Book Lisbon.", "done"))
    results = []
    threads = [threading.Thread(target=lambda: results.append(flush_session(rt, meter.session_id))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)

    assert sorted(r.status for r in results) == ["already_flushed", "flushed"]
    assert [n.text for n in notes(rt)] == ["Alice flies to Lisbon."]
    assert windows(rt) == [(1, 2, 0, "manual")]


def test_the_flush_sends_only_cleaned_recent_content(make_rt, server):
    rt = make_rt(tool_result_chars=20)
    secret = "sk-proj-4fJk29XqLmN8pR7sT1uV3wY5zA6bC0dE"
    server.push(notes_reply())
    append(rt, ALICE, "s1", chat("old message", "old reply"))
    flush_session(rt, 1)
    server.push(notes_reply())
    append(
        rt,
        ALICE,
        "s1",
        [
            {"role": "system", "content": "You are a travel agent."},
            {
                "role": "user",
                "content": f"<memory-context>\n- The user likes tea.\n</memory-context>\nMy key is {secret}",
            },
            {"role": "tool", "name": "search", "content": "0123456789" * 10},
            {"role": "assistant", "content": "Found three hotels."},
        ],
    )

    result = flush_session(rt, 1)

    sent = chat_bodies(server)[-1]["messages"][-1]["content"]
    assert result.window == (3, 6)
    assert "old message" not in sent and "travel agent" not in sent and "likes tea" not in sent
    assert secret not in sent and "[REDACTED:openai_key]" in sent
    assert "[5] search: " + "0123456789" * 2 + "\n" in sent
    assert "[6] assistant: Found three hotels." in sent
    with session_scope(rt.engine) as s:
        said = s.exec(select(Message.created_at).where(Message.seq >= 4).order_by(Message.seq)).all()
    days = [f"# {day}" for day in dict.fromkeys(day_words(at) for at in said)]
    assert [ln for ln in sent.splitlines() if ln.startswith("# ")] == days  # each day the window was said on, once
    assert sent.startswith(f"<transcript>\n{days[0]}\n[4] ")


def test_notes_become_indexed_daily_note_memories_and_the_daily_file(make_rt, server):
    rt = make_rt()
    server.push(notes_reply("Alice booked Hotel Lusa for 3 nights.", "Alice wants a window seat.", seqs=[1, 2]))
    meter = append(rt, ALICE, "s1", chat("Book Hotel Lusa, 3 nights.", "Booked.", "Window seat please."))

    result = flush_session(rt, meter.session_id)

    with session_scope(rt.engine) as s:
        mems = [s.get(Memory, mid) for mid in result.memory_ids]
    assert [(m.kind, m.source, m.status) for m in mems] == [("daily_note", "flush", "candidate")] * 2
    assert all(m.indexed_at is not None for m in mems)
    assert mems[0].evidence == [{"session_id": meter.session_id, "external_id": "s1", "seqs": [1, 2]}]
    hits = rt.index.search_text("Hotel Lusa", ALICE, 5)
    assert [h.memory_id for h in hits] == [mems[0].id]
    path = markdown.user_dir(rt.settings.workspace_dir, "alice") / "memory" / f"{result.day}.md"
    assert result.path == str(path)
    assert path.read_text() == (
        f"# Daily notes {result.day}\n\n"
        f"{markdown.daily_note_line(mems[0].id, 'Alice booked Hotel Lusa for 3 nights.')}\n"
        f"{markdown.daily_note_line(mems[1].id, 'Alice wants a window seat.')}\n"
    )
    server.push(notes_reply("Alice prefers trains."))
    append(rt, ALICE, "s1", chat("I prefer trains."))
    second = flush_session(rt, meter.session_id)
    lines = path.read_text().splitlines()
    assert len(lines) == 5 and lines[-1] == markdown.daily_note_line(second.memory_ids[0], "Alice prefers trains.")


def test_the_daily_notes_are_filed_under_the_users_day(make_rt, server):
    rt = make_rt(timezone="America/Los_Angeles")
    server.push(notes_reply("Alice booked Hotel Lusa."))
    said = [{**m, "created_at": "2023-05-09T02:00:00+00:00"} for m in chat("Book Hotel Lusa.", "Booked.")]
    meter = append(rt, ALICE, "s1", said)
    result = flush_session(rt, meter.session_id, now=datetime(2023, 5, 9, 2, 30, tzinfo=UTC))
    sent = chat_bodies(server)[-1]["messages"][-1]["content"]
    assert sent.startswith("<transcript>\n# 8 May 2023\n[1] ")  # still the 8th in California
    assert result.day == "2023-05-08"
    assert result.path == str(markdown.user_dir(rt.settings.workspace_dir, "alice") / "memory" / "2023-05-08.md")
    with session_scope(rt.engine) as s:
        assert {n.day for n in s.exec(select(DailyNote)).all()} == {"2023-05-08"}  # the window row and the note


def test_without_an_llm_the_rules_extractor_serves(make_rt, server):
    rt = make_rt(llm=False)
    meter = append(rt, ALICE, "s1", chat("I prefer window seats on trains.", "Noted.", "My name is Ana."))

    result = flush_session(rt, meter.session_id)

    assert result.extractor == "rules"
    assert result.notes == ["The user prefers window seats on trains.", "The user's name is Ana."]
    assert chat_bodies(server) == []


def test_an_empty_answer_still_closes_the_window(make_rt, server):
    rt = make_rt()
    server.push(Reply.json({"notes": []}))
    meter = append(rt, ALICE, "s1", chat("hello", "hi"))
    result = flush_session(rt, meter.session_id)
    assert (result.status, result.notes) == ("flushed", [])
    assert windows(rt) == [(1, 2, 0, "manual")]
    assert flush_session(rt, meter.session_id).status == "nothing_new"


def test_a_failed_model_call_leaves_the_window_open(make_rt, server):
    from dreamer.core.errors import LLMError

    rt = make_rt()
    server.push(Reply.error(400))
    meter = append(rt, ALICE, "s1", chat("hello", "hi"))
    with pytest.raises(LLMError):
        flush_session(rt, meter.session_id)
    assert windows(rt) == []
    server.push(notes_reply("Alice said hello."))
    assert flush_session(rt, meter.session_id).status == "flushed"


def test_the_flush_cli_and_serve_refuse_a_bad_threshold(tmp_path, monkeypatch):
    from dreamer.cli import app, cabinet, online, records  # noqa: F401  (register commands)

    monkeypatch.setenv("DREAMER_SOFT_THRESHOLD", "-1")
    monkeypatch.setenv("DREAMER_API_TOKENS", "")
    result = CliRunner().invoke(app, ["--data-dir", str(tmp_path / "d"), "serve", "--insecure-single-user", "u"])
    assert isinstance(result.exception, ConfigError)
    assert "compaction point" in str(result.exception)


def test_the_same_note_from_two_sessions_is_one_memory(make_rt, server):
    rt = make_rt()
    for ext in ("s1", "s2"):
        server.push(notes_reply("Alice is allergic to peanuts."))
        meter = append(rt, ALICE, ext, chat("I am allergic to peanuts.", "Noted."))
        flush_session(rt, meter.session_id)
    rows = notes(rt)
    assert len(rows) == 2 and rows[0].memory_id == rows[1].memory_id
    with session_scope(rt.engine) as s:
        m = s.get(Memory, rows[0].memory_id)
    assert (m.status, [e["external_id"] for e in m.evidence]) == ("verified", ["s1", "s2"])


def test_a_flush_holds_its_users_consolidation_lock_and_writes_nothing_without_it(make_rt, server):
    """With a Qdrant server flushes of one user may run in several processes: they hold the
    user's lease as every writer does. Kept by another writer, a flush gives up (retryable) or,
    in the background, is deferred; its window stays open for the next."""
    rt = make_rt(qdrant_url="http://127.0.0.1:1", user_lock_wait_seconds=0)  # its index handed in
    meter = append(rt, ALICE, "s1", chat("I prefer aisle seats.", "noted"))
    outcomes = []
    runner = FlushRunner(
        rt, on_done=lambda result, exc: outcomes.append(result.status if result else type(exc).__name__)
    )
    assert leases.acquire(rt.engine, lock_name("alice"), "another writer", 600)
    try:
        server.push(notes_reply("Alice prefers aisle seats."), notes_reply("Alice prefers aisle seats."))
        with pytest.raises(UserLocked, match="^user 'alice': another writer kept consolidating their memories"):
            flush_session(rt, meter.session_id)
        runner.schedule(meter.session_id, "manual")
        assert runner.wait(30) and outcomes == ["deferred"]
        assert (windows(rt), notes(rt)) == ([], [])

        leases.release(rt.engine, lock_name("alice"), "another writer")
        server.push(notes_reply("Alice prefers aisle seats."))
        assert flush_session(rt, meter.session_id).status == "flushed"
        assert [n.text for n in notes(rt)] == ["Alice prefers aisle seats."]
    finally:
        runner.close()


def test_with_the_index_taken_in_turns_a_flush_takes_the_turn_before_it_writes(settings, sqlite_engine, server):
    """The turn is what keeps two workers' flushes of one user apart there: a flush that cannot
    get it writes nothing, where it used to write its notes and only then wait for the index."""
    from dreamer.engine.shared_index import IndexBusy, end_turn, open_shared_runtime
    from dreamer.llm.client import OpenAILLM, build_openai_client

    st = online_settings(settings, **SMALL, llm_base_url=server.url, embedder="none", index_wait_seconds=0)
    holder = open_shared_runtime(st, engine=sqlite_engine)
    llm = OpenAILLM(build_openai_client(st), model="scripted", max_retries=0, sleep=lambda s: None)
    rt = open_shared_runtime(st, engine=sqlite_engine, llm=llm)
    try:
        meter = append(rt, ALICE, "s1", chat("I prefer aisle seats.", "noted"))
        holder.index_ready()  # another worker has the turn
        server.push(notes_reply("Alice prefers aisle seats."))
        with pytest.raises(IndexBusy):
            flush_session(rt, meter.session_id)
        assert (windows(rt), notes(rt)) == ([], [])

        end_turn(holder)
        server.push(notes_reply("Alice prefers aisle seats."))
        assert flush_session(rt, meter.session_id).status == "flushed"
        assert [n.text for n in notes(rt)] == ["Alice prefers aisle seats."]
    finally:
        end_turn(rt)
        rt.close()
        holder.close()


def test_a_flush_fits_the_models_window_and_leaves_the_rest_for_the_next(make_rt, server):
    rt = make_rt()
    rt.llm.context_window = 2_048  # a local model's window
    said = [
        f"Round {i}: we weighed the trains, the hotels and the weather for the week ahead, again." for i in range(80)
    ]
    meter = append(rt, ALICE, "s1", chat(*said))
    server.push(notes_reply("Alice weighs trains and hotels."))
    result = flush_session(rt, meter.session_id, trigger="manual")
    [body] = chat_bodies(server)
    assert result.status == "flushed"
    assert math.ceil(prompt_tokens_of(body) * 1.2) + body["max_tokens"] <= 2_048
    [(start, end, _cycle, _trigger)] = windows(rt)
    assert start == 1 and 1 < end < len(said)  # the rest waits for the next flush
