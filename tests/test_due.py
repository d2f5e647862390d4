from datetime import timedelta

from dreamer.core.models import Cursor, Session, utcnow
from dreamer.engine.due import DueRules, due_sessions, held_sessions, hold_reason, session_groups
from dreamer.store.db import session_scope

RULES = DueRules(
    min_rounds=4, quiet=timedelta(minutes=10), max_age=timedelta(days=30), limit=10, short_quiet=timedelta(hours=6)
)
SHORT = "min_rounds: {} of 4 rounds (DREAMER_MIN_ROUNDS); a shorter session is due once quiet 21600 s, active {} s ago (DREAMER_SHORT_QUIET_SECONDS)"


def test_hold_reason_names_the_rule_and_its_setting():
    now = utcnow()
    ok = dict(
        last_seq=10, processed_seq=5, status="ok", rounds=4, updated_at=now - timedelta(hours=1), now=now, rules=RULES
    )

    def held(**change):
        explicit, forced = change.pop("explicit", False), change.pop("forced", False)
        hold = hold_reason(**{**ok, **change}, explicit=explicit, forced=forced)
        return None if hold is None else str(hold)

    assert held() is None
    assert held(processed_seq=10) == "nothing_new: no message past 10"
    assert held(status="quarantined") == "quarantined: use `dreamer reprocess --quarantined`"
    assert held(status="failed") is None
    assert held(rounds=3) == SHORT.format(3, 3600)
    assert held(rounds=1, updated_at=now - timedelta(hours=6)) is None  # short, and quiet long enough
    assert held(rounds=0, updated_at=now - timedelta(hours=7)) is None
    assert held(rounds=1, forced=True) is None  # a forced pass takes a short session at once
    assert held(updated_at=now - timedelta(minutes=5), forced=True) is None  # and one not yet quiet
    assert held(updated_at=now - timedelta(days=31), forced=True).startswith("max_age:")
    assert held(status="quarantined", forced=True).startswith("quarantined:")
    assert (
        held(updated_at=now - timedelta(minutes=5))
        == "quiet_period: active 300 s ago, quiet after 600 s (DREAMER_QUIET_PERIOD_SECONDS)"
    )
    assert held(updated_at=now - timedelta(days=31)) == "max_age: active 31 days ago, over 30 (DREAMER_MAX_AGE_DAYS)"
    assert held(rounds=1, updated_at=now, explicit=True) is None
    assert held(status="quarantined", explicit=True) == "quarantined: use `dreamer reprocess --quarantined`"
    assert held(rounds=3, updated_at=now).startswith("min_rounds:")  # rounds are named before quiet
    naive = (now - timedelta(minutes=5)).replace(tzinfo=None)  # as SQLite hands it back
    assert hold_reason(**{**ok, "updated_at": naive}).by == "quiet_period"


def _add(s, ext, *, last_seq, processed, status="ok", rounds=5, age=timedelta(hours=1), now):
    sess = Session(
        external_id=ext,
        source="t",
        user_id="u",
        last_seq=last_seq,
        rounds=rounds,
        updated_at=now - age,
        created_at=now - age,
    )
    s.add(sess)
    s.flush()
    s.add(Cursor(session_id=sess.id, processed_seq=processed, status=status))
    return sess


def test_sql_selection_matches_the_policy_oldest_first(engine):
    now = utcnow()
    with session_scope(engine) as s:
        _add(s, "young", last_seq=5, processed=0, age=timedelta(minutes=1), now=now)
        _add(s, "done", last_seq=5, processed=5, now=now)
        _add(s, "quarantined", last_seq=5, processed=0, status="quarantined", now=now)
        _add(s, "short", last_seq=5, processed=0, rounds=2, now=now)
        _add(s, "short-quiet", last_seq=5, processed=0, rounds=1, age=timedelta(hours=7), now=now)
        _add(s, "old", last_seq=5, processed=0, age=timedelta(days=40), now=now)
        _add(s, "b", last_seq=9, processed=3, age=timedelta(hours=1), now=now)
        _add(s, "a", last_seq=9, processed=0, status="failed", age=timedelta(hours=2), now=now)
    with session_scope(engine) as s:
        got = [sess.external_id for sess, _ in due_sessions(s, RULES, now)]
        assert got == ["short-quiet", "a", "b"]
        limited = DueRules(RULES.min_rounds, RULES.quiet, RULES.max_age, limit=1, short_quiet=RULES.short_quiet)
        assert [x.external_id for x, _ in due_sessions(s, limited, now)] == ["short-quiet"]
        forced = [x.external_id for x, _ in due_sessions(s, RULES, now, forced=True)]
        assert forced == ["short-quiet", "a", "short", "b", "young"]
        young_id = s.exec(Session.__table__.select().where(Session.external_id == "young")).first().id
        assert [x.external_id for x, _ in due_sessions(s, RULES, now, session_ids=[young_id])] == ["young"]
        held = [(x.external_id, h and h.by) for x, h in held_sessions(s, RULES, now)]
        assert held == [
            ("old", "max_age"),
            ("short-quiet", None),
            ("a", None),
            ("quarantined", "quarantined"),
            ("short", "min_rounds"),
            ("b", None),
            ("young", "quiet_period"),
        ]
        assert [(x.external_id, h) for x, h in held_sessions(s, RULES, now, session_ids=[young_id])] == [
            ("young", None)
        ]


def test_session_groups_are_consecutive_sessions_of_one_owner_and_mode_at_most_size():
    def sess(i, user, mode="agent", agent=None):
        return Session(id=i, external_id=str(i), user_id=user, mode=mode, agent_id=agent)

    order = [
        sess(1, "a"),
        sess(2, "a"),
        sess(3, "a"),
        sess(4, "b"),
        sess(5, "a"),
        sess(6, "a", "code"),
        sess(7, "a", "code"),
        sess(8, "a", agent="x"),
    ]
    assert [[s.id for s in g] for g in session_groups(order, 2)] == [[1, 2], [3], [4], [5], [6, 7], [8]]
    assert [[s.id for s in g] for g in session_groups(order, 1)] == [[i] for i in range(1, 9)]
    assert session_groups([], 3) == []
