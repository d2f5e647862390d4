"""The pure policy of code work: lifecycle, state status, propagation, workspace evidence, ranking."""

import pytest

from dreamer.core.code_work import experience as life
from dreamer.core.code_work.experience_rank import Doc, exact_keywords, rank, stem, words
from dreamer.core.code_work.project_state import stale_evidence
from dreamer.core.code_work.propagate import Node, dependents


def test_two_distinct_units_verify_an_entry_and_one_unit_twice_counts_once():
    lc = life.Lifecycle()
    out = life.after_verify(lc, "OrderList", "passed")
    assert out.status == "candidate"
    out = life.after_verify(out.after, "OrderList", "passed")
    assert (out.status, out.after.verified_units) == ("candidate", ("OrderList",))
    out = life.after_verify(out.after, "RefundList", "passed")
    assert (out.status, out.after.verified_units) == ("verified", ("OrderList", "RefundList"))
    assert out.reason == "passed in 2 distinct units: OrderList, RefundList"


def test_nothing_inferred_becomes_verified_from_one_success():
    out = life.after_verify(life.Lifecycle(), "LegacyTable", "passed")
    assert out.status == "candidate"
    assert out.after.ever_verified is False


def test_a_counterexample_narrows_a_candidate_and_demotes_a_verified_entry():
    lc = life.Lifecycle(conditions=("callers do not depend on the slot name",))
    out = life.after_counterexample(lc, "callers call reload on the table ref")
    assert out.status == "candidate"
    assert out.after.conditions == (
        "callers do not depend on the slot name",
        "not when: callers call reload on the table ref",
    )
    verified = life.Lifecycle(status="verified", ever_verified=True)
    assert life.after_counterexample(verified, "x broke").status == "review_required"


def test_after_review_one_passed_check_or_a_confirm_verifies_again():
    held = life.Lifecycle(status="review_required", ever_verified=True, verified_units=("A", "B"))
    assert life.after_verify(held, "C", "passed").status == "verified"
    assert life.after_confirm(held, "dana").status == "verified"
    never = life.Lifecycle(status="review_required")
    assert life.after_verify(never, "C", "passed").status == "review_required"


def test_a_failed_check_is_a_counterexample():
    verified = life.Lifecycle(status="verified", ever_verified=True)
    out = life.after_verify(verified, "CouponList", "failed")
    assert out.status == "review_required"
    assert out.after.counterexamples == ("check in CouponList failed",)


def test_a_verified_claim_needs_a_passed_check_or_a_person():
    assert life.state_status("verified", {"result": "passed", "command": "tsc"}, None) == (
        "verified",
        "check passed: tsc",
    )
    assert life.state_status("verified", {"result": "pending"}, None)[0] == "in_progress"
    assert life.state_status("verified", {"result": "failed"}, None)[0] == "in_progress"
    assert life.state_status("verified", {}, None)[0] == "in_progress"
    assert life.state_status("verified", {}, "dana") == ("verified", "confirmed by dana")
    with pytest.raises(life.InvalidExperience):
        life.state_status("done", {}, None)


def test_repository_text_is_observed_evidence_never_a_rule():
    assert life.source_of("confirmed", "repository") == ("observed", life.REPOSITORY_NOTE)
    assert life.source_of("confirmed", "agent")[0] == "inferred"
    assert life.source_of("confirmed", "person") == ("confirmed", None)


def test_targets_are_checked():
    assert life.parse_target("version:react") == ("version", "react")
    for bad in ("react", "path:x", "file:"):
        with pytest.raises(life.InvalidExperience):
            life.parse_target(bad)


def _graph() -> list[Node]:
    nodes = [Node("S0", "state", "Table", ("file:Table.vue",))]
    nodes += [Node(f"S{i}", "state", f"Page{i}", ("unit:Table",)) for i in range(1, 13)]
    nodes += [
        Node("E1", "entry", "Table", ("unit:Table",), ("react",)),
        Node("E2", "entry", "Table", (), ("react-dom",)),
        Node("S13", "state", "Report", ("unit:Page1",)),
    ]
    return nodes


def test_a_file_change_reaches_every_dependent_transitively_and_no_other():
    got = dependents("file:Table.vue", _graph(), 8)
    assert {r.key for r in got} == {"S0", *(f"S{i}" for i in range(1, 14)), "E1"}
    assert {r.key: r.depth for r in got}["S13"] == 3
    assert {r.key for r in dependents("file:Table.vue", _graph(), 2)} == {"S0", *(f"S{i}" for i in range(1, 13)), "E1"}


def test_a_version_change_reaches_exactly_that_library_key():
    assert [r.key for r in dependents("version:react", _graph(), 8)] == ["E1"]
    assert [r.key for r in dependents("version:vue", _graph(), 8)] == []


def test_an_entrys_own_unit_is_not_a_dependency():
    assert {r.key for r in dependents("unit:Table", _graph(), 1)} == {*(f"S{i}" for i in range(1, 13)), "E1"}
    assert "E2" not in {r.key for r in dependents("unit:Table", _graph(), 8)}


def test_files_decide_a_states_evidence_and_a_commit_alone_needs_the_head():
    ev = {"files": {"a.ts": "sha256:aa"}, "commit": "abc"}
    assert stale_evidence(ev, {"a.ts": "sha256:aa"}, "def") == []
    assert [s.target for s in stale_evidence(ev, {"a.ts": "sha256:bb"}, "abc")] == ["file:a.ts"]
    assert stale_evidence(ev, {"a.ts": None}, None)[0].reason.startswith("file a.ts is gone")
    assert [s.target for s in stale_evidence({"commit": "abc"}, {}, "def0")] == ["commit:abc"]
    assert stale_evidence({"commit": "abc"}, {}, None) == []


def test_an_exact_error_code_beats_vaguely_similar_text():
    docs = [
        Doc("vague", "type errors in the table props when migrating a table component", "verified", 12),
        Doc("code", "TS2322 on columns: the render function returns a string, wrap it", "candidate", 1),
    ]
    assert exact_keywords("fix TS2322 in the table props", docs) == {"ts2322"}
    assert [r.key for r in rank("fix TS2322 in the table props", docs, limit=5)] == ["code"]


def test_impact_and_status_rerank_alike_entries():
    docs = [
        Doc("one", "prefer a render function for a column slot", "verified", 1),
        Doc("twelve", "prefer a render function for a column slot", "verified", 12),
        Doc("held", "prefer a render function for a column slot", "review_required", 12),
    ]
    assert [r.key for r in rank("column slot render function", docs, limit=5)] == ["twelve", "one", "held"]


def test_the_light_stem_joins_the_forms_of_a_word():
    assert [stem(w) for w in ("emitted", "emits", "rendering", "tables", "passes", "rows", "status", "used")] == [
        "emit",
        "emit",
        "render",
        "table",
        "pass",
        "row",
        "status",
        "used",
    ]


def test_a_lone_letter_is_no_word_but_a_digit_is():
    assert words("stop the card processor's sandbox") == ["stop", "card", "processor", "sandbox"]
    assert words("retry 3 times on error 5") == ["retry", "3", "time", "error", "5"]
    shared_s = [Doc("xdist", "pytest-xdist shares the module's state", "verified"), Doc("other", "pay", "verified")]
    assert rank("the processor's sandbox", shared_s, limit=5) == []  # an "s" in common is no match
