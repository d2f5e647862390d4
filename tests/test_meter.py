"""The meter's running state: the pure replay, the store keeping it, and the migration that fills it in."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from dreamer.core.meter import MeterState, advance, mark_of, reported
from dreamer.core.models import Message, Session
from dreamer.core.tokens import count_tokens
from dreamer.ingest import record_messages
from dreamer.ingest.store import append_messages
from dreamer.store import db
from dreamer.store.db import session_scope


def m(tokens: int, **mark) -> tuple[int, dict | None]:
    return tokens, ({"meter": mark} if mark else None)


# --------------------------------------------------------------------------- pure


def test_without_marks_the_tokens_are_the_total():
    state = advance(MeterState(), [m(10), m(20)])
    assert (state, state.tokens) == (MeterState(30, 0, 0, 0), 30)


def test_a_figure_counts_from_just_after_its_message():
    state = advance(MeterState(), [m(10), m(20, context_tokens=500), m(7)])
    assert (state, state.tokens) == (MeterState(37, 0, 500, 30), 507)


def test_a_compaction_opens_a_cycle_counted_from_just_before_its_message():
    state = advance(MeterState(), [m(10, context_tokens=500), m(20, compacted=True), m(5)])
    assert (state, state.tokens) == (MeterState(35, 1, 0, 10), 25)


def test_a_message_that_compacts_and_reports_counts_its_figure():
    state = advance(MeterState(), [m(10), m(20, compacted=True, context_tokens=40), m(3), m(4, compacted=True)])
    assert (state, state.tokens) == (MeterState(37, 2, 0, 33), 4)


def test_advancing_batch_by_batch_equals_advancing_at_once():
    messages = [m(10), m(20, context_tokens=500), m(7, compacted=True), m(1), m(2, context_tokens=90), m(6)]
    state = MeterState()
    for batch in (messages[:1], messages[1:3], messages[3:]):
        state = advance(state, batch)
    assert state == advance(MeterState(), messages) == MeterState(46, 1, 90, 40)
    assert state.tokens == 96


def test_marks_that_are_not_marks_are_ignored():
    assert mark_of({"meter": "compacted"}) == {} and mark_of(None) == {} and mark_of({"x": 1}) == {}
    figures = (True, -1, 1.5, "9", 0, 12, 2**31 - 1, 2**31)
    assert [reported({"context_tokens": v}) for v in figures] == [None, None, None, None, 0, 12, 2**31 - 1, None]
    state = advance(MeterState(), [(10, {"meter": "compacted"}), m(5, context_tokens=True), m(2, compacted=False)])
    assert state == MeterState(17, 0, 0, 0)


# --------------------------------------------------------------------------- the store keeps it


def row_state(engine, session_id: int) -> MeterState:
    with session_scope(engine) as s:
        row = s.get(Session, session_id)
        return MeterState(row.token_total, row.meter_cycle, row.meter_figure, row.meter_base)


def replayed(engine, session_id: int) -> MeterState:
    with session_scope(engine) as s:
        rows = s.exec(
            sa.select(Message.token_count, Message.meta).where(Message.session_id == session_id).order_by(Message.seq)
        ).all()
    return advance(MeterState(), rows)


def test_every_way_of_storing_messages_keeps_the_state_of_a_replay(engine):
    appended = append_messages(
        engine,
        "live",
        [
            {"role": "user", "content": "plan the trip to Lisbon"},
            {"role": "assistant", "content": "sure", "meta": {"meter": {"context_tokens": 300}}},
        ],
        user_id="alice",
    )
    append_messages(
        engine,
        "live",
        [
            {"role": "user", "content": "after the compaction", "meta": {"meter": {"compacted": True}}},
            {"role": "assistant", "content": "noted, booking the flights now"},
        ],
        user_id="alice",
    )
    recorded = record_messages(
        engine,
        "file",
        [
            {"role": "user", "content": "one two three"},
            {"role": "assistant", "content": "four"},
        ],
        user_id="alice",
        source="import",
    )
    record_messages(
        engine,
        "file",
        [
            {"role": "user", "content": "one two three"},
            {"role": "assistant", "content": "four"},
            {"role": "user", "content": "five six", "meta": {"meter": {"context_tokens": 70}}},
        ],
        user_id="alice",
        source="import",
    )  # the stored prefix is skipped, the tail appended

    t = [
        count_tokens(text)
        for text in ("plan the trip to Lisbon", "sure", "after the compaction", "noted, booking the flights now")
    ]
    live = row_state(engine, appended.session_id)
    assert live == replayed(engine, appended.session_id) == MeterState(sum(t), 1, 0, t[0] + t[1])
    assert live.tokens == t[2] + t[3]
    total = sum(count_tokens(text) for text in ("one two three", "four", "five six"))
    imported = row_state(engine, recorded.session_id)
    assert imported == replayed(engine, recorded.session_id) == MeterState(total, 0, 70, total)
    assert imported.tokens == 70


def test_a_figure_too_large_to_be_a_context_is_stored_and_ignored(engine):
    big = record_messages(
        engine,
        "big",
        [
            {"role": "user", "content": "hello there", "meta": {"meter": {"context_tokens": 2**40}}},
        ],
        user_id="alice",
    )
    assert row_state(engine, big.session_id) == MeterState(count_tokens("hello there"), 0, 0, 0)
    assert stored_meta(engine, big.session_id) == [{"meter": {"context_tokens": 2**40}}]


def stored_meta(engine, session_id: int) -> list:
    with session_scope(engine) as s:
        return list(s.exec(sa.select(Message.meta).where(Message.session_id == session_id)).scalars())


# --------------------------------------------------------------------------- the migration fills it in


def test_the_migration_replays_the_marks_of_stored_sessions(db_url):
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine, "0003")
        meta = sa.MetaData()
        sessions = sa.Table("sessions", meta, autoload_with=engine)
        messages = sa.Table("messages", meta, autoload_with=engine)
        now = datetime(2026, 11, 1, tzinfo=UTC)
        with engine.begin() as conn:
            ids = [
                conn.execute(
                    sa.insert(sessions)
                    .values(
                        external_id=f"s{n}",
                        source="api",
                        user_id="alice",
                        mode="agent",
                        created_at=now,
                        updated_at=now,
                        message_count=0,
                        rounds=0,
                        last_seq=0,
                    )
                    .returning(sessions.c.id)
                ).scalar_one()
                for n in range(3)
            ]
            plans = {
                ids[0]: [m(10), m(20, context_tokens=500), m(7, compacted=True), m(1), m(2, context_tokens=90), m(6)],
                ids[1]: [m(5), m(6)],
                ids[2]: [(4, {"meter": "compacted"}), m(3, context_tokens=True)],
            }
            for sid, plan in plans.items():
                for seq, (tokens, meta) in enumerate(plan, start=1):  # one by one: rows differ in their keys
                    conn.execute(
                        sa.insert(messages).values(
                            session_id=sid,
                            seq=seq,
                            role="user",
                            content=f"m{seq}",
                            content_hash=f"{sid}:{seq}",
                            created_at=now,
                            token_count=tokens,
                            **({"meta": meta} if meta else {}),
                        )
                    )

        db.upgrade(engine)

        assert [row_state(engine, sid) for sid in ids] == [
            MeterState(46, 1, 90, 40),
            MeterState(11, 0, 0, 0),
            MeterState(7, 0, 0, 0),
        ]
        db.downgrade(engine, "0003")
        assert "token_total" not in {c["name"] for c in sa.inspect(engine).get_columns("sessions")}
    finally:
        engine.dispose()
