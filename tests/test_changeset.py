"""A run as a changeset (pure): what undoes it, what stands in the way, the fields put back."""

from datetime import UTC, datetime

import pytest

from dreamer.core.changeset import Change, Conflict, pending_holds, plan_revert, snapshot, undo_fields

NOW = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
T0 = datetime(2026, 12, 1, 9, 30, tzinfo=UTC)


def test_a_run_is_undone_newest_first_and_only_once():
    history = [
        Change(1, "a", "add", 1),
        Change(2, "b", "add", 2),
        Change(3, "a", "merge", 2, {"added": [{"session_id": 2, "seqs": [1]}]}),
        Change(4, "a", "supersede", 2, {"by": "b"}),
    ]
    plan = plan_revert(2, history)
    assert [c.id for c in plan.undo] == [4, 3, 2]
    assert (plan.conflicts, plan.unsupported, plan.already) == ([], [], 0)

    history += [Change(5 + i, c.memory_id, "revert", None, {"of": c.id, "run": 2}) for i, c in enumerate(plan.undo)]
    again = plan_revert(2, history)
    assert (again.undo, again.already, again.blocked) == ([], 3, False)


def test_a_later_change_to_the_same_memory_is_a_conflict_unless_it_was_undone():
    history = [
        Change(1, "a", "add", 1),
        Change(2, "a", "merge", 1),
        Change(3, "b", "add", 1),
        Change(4, "a", "merge", 2),
        Change(5, "b", "forget", None),
        Change(6, "c", "add", 2),
    ]
    plan = plan_revert(1, history)
    assert plan.conflicts == [Conflict("a", 2, "merge", 4), Conflict("b", None, "forget", 5)]
    assert plan.blocked

    history.append(Change(7, "a", "revert", None, {"of": 4, "run": 2}))  # run 2's merge undone since
    assert plan_revert(1, history).conflicts == [Conflict("b", None, "forget", 5)]


def test_an_earlier_run_is_not_in_the_way_and_an_unknown_event_blocks():
    history = [Change(1, "a", "add", 1), Change(2, "a", "merge", 2), Change(3, "a", "update", 2)]
    plan = plan_revert(2, history)
    assert [c.id for c in plan.undo] == [2]
    assert plan.conflicts == []
    assert [c.id for c in plan.unsupported] == [3]
    assert plan.blocked


def test_undoing_an_add_retires_the_memory_without_forgetting_it():
    assert undo_fields(Change(1, "a", "add", 1), {"status": "candidate"}, now=NOW) == {
        "status": "reverted",
        "valid_to": NOW,
    }


def test_undoing_a_merge_takes_out_the_evidence_it_added_and_puts_the_fields_back():
    kept, added = {"session_id": 1, "seqs": [2]}, {"session_id": 3, "seqs": [4, 5]}
    data = {
        "evidence": [added],
        "added": [added],
        "status": ["candidate", "verified"],
        "before": snapshot({"status": "candidate", "importance": 0.5, "last_seen": T0, "updated_at": T0}),
    }
    row = {"status": "verified", "evidence": [kept, added, {"session_id": 9, "seqs": [1]}], "untrusted": False}
    assert undo_fields(Change(2, "a", "merge", 1, data), row, now=NOW) == {
        "status": "candidate",
        "importance": 0.5,
        "last_seen": T0,
        "updated_at": T0,
        "evidence": [kept, {"session_id": 9, "seqs": [1]}],
    }


def test_a_merge_recorded_before_the_added_list_takes_out_the_evidence_it_brought():
    brought = {"session_id": 3, "seqs": [4]}
    data = {"evidence": [brought], "status": ["candidate", "verified"]}
    row = {"status": "verified", "evidence": [{"session_id": 1, "seqs": [1]}, brought], "untrusted": False}
    assert undo_fields(Change(2, "a", "merge", 1, data), row, now=NOW) == {
        "status": "candidate",
        "evidence": [{"session_id": 1, "seqs": [1]}],
    }


def test_undoing_a_supersede_makes_the_memory_current_again():
    data = {
        "by": "b",
        "status": ["verified", "superseded"],
        "before": snapshot({"status": "verified", "updated_at": T0}),
    }
    row = {"status": "superseded", "evidence": [], "untrusted": False}
    assert undo_fields(Change(3, "a", "supersede", 1, data), row, now=NOW) == {
        "valid_to": None,
        "superseded_by": None,
        "updated_at": T0,
        "status": "verified",
    }


def test_a_supersede_recorded_with_its_successor_only_gets_the_status_its_evidence_gives():
    two_sessions = [{"session_id": 1, "seqs": [1]}, {"session_id": 2, "seqs": [1]}]
    row = {"status": "superseded", "evidence": two_sessions, "untrusted": False}
    assert undo_fields(Change(3, "a", "supersede", 1, {"by": "b"}), row, now=NOW)["status"] == "verified"
    row = {"status": "superseded", "evidence": two_sessions[:1], "untrusted": False}
    assert undo_fields(Change(3, "a", "supersede", 1, {"by": "b"}), row, now=NOW)["status"] == "candidate"


def test_undoing_a_hold_or_a_forget_puts_the_status_back():
    row = {"status": "review_required", "evidence": [], "untrusted": False}
    hold = Change(4, "a", "hold", 1, {"by": "b", "status": ["verified", "review_required"]})
    assert undo_fields(hold, row, now=NOW) == {"status": "verified"}
    forget = Change(5, "a", "forget", 1, {"status": ["candidate", "forgotten"]})
    assert undo_fields(forget, {**row, "status": "forgotten"}, now=NOW) == {"valid_to": None, "status": "candidate"}
    with pytest.raises(ValueError, match="no undo for a update event"):
        undo_fields(Change(6, "a", "update", 1), row, now=NOW)


def test_holds_accepted_or_dropped_are_no_longer_pending():
    history = [
        Change(1, "a", "hold", 3, {"by": "x"}),
        Change(2, "b", "hold", 3, {"by": "y"}),
        Change(3, "c", "hold", 3, {"by": "z"}),
        Change(4, "d", "hold", 4, {"by": "w"}),
        Change(5, "a", "supersede", 3, {"by": "x", "accepted": 1}),
        Change(6, "b", "revert", None, {"of": 2, "run": 3}),
    ]
    assert [c.id for c in pending_holds(3, history)] == [3]


def test_a_snapshot_keeps_the_restored_fields_as_json():
    assert snapshot({"status": "verified", "updated_at": T0, "text": "x", "valid_to": None}) == {
        "status": "verified",
        "updated_at": "2026-12-01T09:30:00+00:00",
        "valid_to": None,
    }
