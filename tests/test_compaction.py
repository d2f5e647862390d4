"""The pure compaction policy: triggers, the role filter, protection, the clearing draft, the
decision, and no orphan call or result after any compaction."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamer.core.compaction.plan import (
    CompactionPath,
    clearing_draft,
    decide,
    summary_floor,
    summary_segment,
)
from dreamer.core.compaction.policy import Policy, due, is_marker, policy_of, shape_of, total_tokens
from dreamer.core.settings import Settings

BIG = "row 4411 ok; " * 120  # about 600 tokens


def call(cid: str, name: str = "run_sql", args: str = "{}") -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def tool_round(cid: str, body: str = BIG, name: str = "run_sql") -> list[dict]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [call(cid, name)]},
        {"role": "tool", "tool_call_id": cid, "content": body},
    ]


def task(rounds: int, body: str = BIG) -> list[dict]:
    msgs = [{"role": "system", "content": "You are a careful agent."}, {"role": "user", "content": "migrate"}]
    for k in range(rounds):
        msgs += tool_round(f"c{k}", body)
    return msgs


def counter_id() -> object:
    n = itertools.count(1)
    return lambda: f"ofl_{next(n):04d}"


def orphans(messages: list[dict]) -> tuple[set[str], set[str]]:
    """(calls without a result, results without a call) of a message list."""
    calls = {c["id"] for m in messages for c in m.get("tool_calls") or []}
    results = {m["tool_call_id"] for m in messages if m.get("role") == "tool"}
    return calls - results, results - calls


def test_token_trigger_and_message_trigger():
    msgs = task(6)
    assert due(msgs, Policy(max_tokens=20_000)) is None
    assert due(msgs, Policy(max_tokens=total_tokens(msgs) - 1)) == "tokens"
    assert due(msgs, Policy(max_messages=len(msgs) - 1)) == "messages"
    assert due(msgs, Policy(max_messages=len(msgs), max_tokens=total_tokens(msgs))) is None


def test_clearing_that_fits_is_kept_oldest_first_recent_rounds_untouched():
    msgs = task(6)
    d = decide(msgs, Policy(keep_rounds=2, max_tokens=1000), budget=2000, new_id=counter_id())
    assert d.path == CompactionPath.CLEAR and d.trigger == "tokens"
    assert [o.index for o in d.draft.offloads] == [3, 5, 7, 9]
    assert d.draft.messages[3]["content"] == (
        f"[tool output offloaded: {d.draft.offloads[0].tokens} tokens, id ofl_0001; restore_offloaded to read it]"
    )
    assert d.draft.messages[10:] == msgs[10:]  # the two recent rounds, verbatim
    assert d.draft.offloads[0].body == BIG and d.draft.offloads[0].tool == "run_sql"


def test_insufficient_clearing_is_discarded():
    msgs = task(6)  # 4 514 tokens; all cleared 1 029; a summary keeps 769 verbatim (the last round)
    d = decide(msgs, Policy(keep_rounds=1, max_tokens=1000), budget=900, new_id=counter_id())
    assert d.path == CompactionPath.SUMMARY and d.draft is None and d.shape is not None and d.shape.recent == 12


def test_clearing_is_kept_over_the_budget_when_no_summary_could_fit():
    msgs = task(6)  # the three protected rounds alone are 2 271 tokens: no summary meets 1 000
    policy = Policy(keep_rounds=3, max_tokens=1000)
    d = decide(msgs, policy, budget=1000, new_id=counter_id())
    assert summary_floor(msgs, policy) == 2271
    assert (d.path, d.note) == (
        CompactionPath.CLEAR,
        "what a summary keeps verbatim is 2271 tokens, over the budget of 1000: cleared, not summarised",
    )
    assert d.draft is not None and [o.id for o in d.draft.offloads] == ["ofl_0001", "ofl_0002", "ofl_0003"]
    assert d.draft.messages[8:] == msgs[8:]  # the protected rounds, verbatim


def test_a_long_talk_over_the_floor_is_still_summarised():
    talk = [
        {"role": r, "content": f"step {k}: " + "we looked at the logs again " * 12}
        for k in range(60)
        for r in ("user", "assistant")
    ]
    msgs = task(1)[:4] + talk + task(4)[4:]  # one old round, sixty exchanges, three protected rounds
    policy = Policy(keep_rounds=3, max_tokens=1000)
    d = decide(msgs, policy, budget=1000, new_id=counter_id())
    assert summary_floor(msgs, policy) > 1000  # no path meets the budget, but a summary comes far nearer
    assert d.path == CompactionPath.SUMMARY and d.note is None


def test_the_message_trigger_goes_to_the_summary_clearing_cannot_cut_messages():
    msgs = task(6)
    d = decide(msgs, Policy(keep_rounds=2, max_messages=10), new_id=counter_id())
    assert (d.path, d.trigger) == (CompactionPath.SUMMARY, "messages")
    seg = summary_segment(msgs, Policy(keep_rounds=2, max_messages=10), "the summary")
    assert len(seg) == 6 and seg[2:] == msgs[-4:]


def test_nothing_due_leaves_the_segment():
    msgs = task(2)
    assert decide(msgs, Policy()).path == CompactionPath.UNCHANGED


def test_role_filter():
    msgs = task(4)
    msgs.insert(2, {"role": "user", "content": BIG})
    only_tools = clearing_draft(msgs, Policy(keep_rounds=1), None, counter_id())
    assert [m["role"] for m in msgs if m not in only_tools.messages] == ["tool", "tool", "tool"]
    users_too = clearing_draft(msgs, Policy(keep_rounds=1, roles=frozenset({"user", "tool"})), None, counter_id())
    assert [o.role for o in users_too.offloads] == ["user", "tool", "tool", "tool"]


def test_large_message_threshold():
    msgs = task(4, body="short answer")
    assert clearing_draft(msgs, Policy(keep_rounds=1, large_tokens=200), None).offloads == []
    assert len(clearing_draft(msgs, Policy(keep_rounds=1, large_tokens=1), None).offloads) == 3


def test_skill_reads_discovery_and_pinned_are_never_cleared():
    msgs = task(0)
    msgs += tool_round("s1", BIG, "Skill") + tool_round("d1", BIG, "tool_search") + tool_round("p1", BIG)
    msgs[-1]["pinned"] = True
    msgs += tool_round("c1") + tool_round("c2")
    d = clearing_draft(msgs, Policy(keep_rounds=1), None, counter_id())
    assert [(o.tool, o.tool_call_id) for o in d.offloads] == [("run_sql", "c1")]


def test_settings_make_the_policy():
    p = policy_of(Settings(compact_roles="tool, user,system", compact_keep_rounds=5, compact_skill_tools="Skill"))
    assert p.roles == frozenset({"tool", "user"}) and p.keep_rounds == 5 and p.skill_tools == frozenset({"Skill"})
    assert (p.max_tokens, p.max_messages) == (20_000, 200)


def test_a_pinned_result_survives_the_summary_with_its_call():
    msgs = task(4)
    msgs[5]["pinned"] = True  # the result of c1: its call comes with it
    seg = summary_segment(msgs, Policy(keep_rounds=1), "the summary")
    assert [m["role"] for m in seg] == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert seg[2:4] == msgs[4:6] and seg[4:] == msgs[-2:]


def test_summary_segment_order():
    msgs = task(0)
    msgs += tool_round("s1", "# Deploy skill\nAlways tag.", "Skill")
    msgs += tool_round("d1", '{"tools": [{"name": "deploy_app"}, {"name": "get_logs"}]}', "tool_search")
    msgs += tool_round("c1") + tool_round("c2")
    seg = summary_segment(msgs, Policy(keep_rounds=1), "did things", env_state="cwd /srv")
    assert [m["role"] for m in seg] == ["system", "user", "assistant", "tool", "user", "user", "user"]
    assert seg[1]["content"].endswith("did things")
    assert seg[2:4] == msgs[-2:]
    assert seg[4]["content"] == "Skills read before the compaction:\n\n# Deploy skill\nAlways tag."
    assert seg[5]["content"] == (
        "Tools discovered before the compaction: deploy_app, get_logs (names only: call tool_search again for a schema)"
    )
    assert seg[6]["content"] == "Environment now:\ncwd /srv"


# --------------------------------------------------------------------------- no orphans, ever

ROLES_SETS = [frozenset({"tool"}), frozenset({"tool", "user"}), frozenset({"tool", "assistant", "user"})]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "rules"}]
    n = itertools.count()
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "say", "calls"]))
        if kind == "user":
            msgs.append({"role": "user", "content": "please " * draw(st.integers(1, 300))})
        elif kind == "say":
            msgs.append({"role": "assistant", "content": "ok " * draw(st.integers(0, 300))})
        else:
            cids = [f"c{next(n)}" for _ in range(draw(st.integers(1, 3)))]
            name = draw(st.sampled_from(["run_sql", "Skill", "tool_search", "read_file"]))
            msgs.append({"role": "assistant", "content": None, "tool_calls": [call(c, name) for c in cids]})
            for c in cids:
                body = {"role": "tool", "tool_call_id": c, "content": "x1 " * draw(st.integers(0, 900))}
                if draw(st.integers(0, 9)) == 0:
                    body["pinned"] = True
                msgs.append(body)
    return msgs


@settings(max_examples=1000, deadline=None)
@given(
    conversations(),
    st.integers(0, 4),
    st.integers(1, 4000),
    st.integers(0, 300),
    st.sampled_from(ROLES_SETS),
)
def test_no_orphan_call_or_result_after_any_compaction(msgs, keep, budget, large, roles):
    policy = Policy(keep_rounds=keep, large_tokens=large, roles=roles, max_tokens=budget, max_messages=30)
    d = decide(msgs, policy, budget=budget, new_id=counter_id())
    out = {CompactionPath.UNCHANGED: msgs, CompactionPath.CLEAR: d.draft.messages if d.draft else msgs}.get(d.path)
    if d.path == CompactionPath.SUMMARY:
        out = summary_segment(msgs, policy, "summary")
        assert [m for m in msgs if m.get("pinned")] == [m for m in out if m.get("pinned")]
    assert orphans(out) == (set(), set())
    if d.path == CompactionPath.CLEAR:
        assert len(out) == len(msgs)
        for before, after in zip(msgs, out):
            assert after.get("tool_calls") == before.get("tool_calls")
            assert after.get("tool_call_id") == before.get("tool_call_id")
            assert after == before or is_marker(after["content"])
        shape = shape_of(msgs, policy)
        for i, (before, after) in enumerate(zip(msgs, out)):
            if i >= shape.recent or shape.tool_of(before) in ("Skill", "tool_search") or before["role"] == "system":
                assert after == before
