"""The pure compaction policy: triggers, the role filter, protection, the clearing draft, the
decision, and after any compaction no orphan call or result and no result over the budget unless
its pinned part is."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamer.core.compaction.decide import FILL, decide
from dreamer.core.compaction.fill import fill
from dreamer.core.compaction.plan import CompactionPath, clearing_draft
from dreamer.core.compaction.policy import Policy, due, is_marker, policy_of, total_tokens
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


@settings(max_examples=600, deadline=None)
@given(
    conversations(),
    st.integers(0, 4),
    st.integers(1, 4000),
    st.integers(0, 300),
    st.sampled_from(ROLES_SETS),
    st.sampled_from([None, "", "the summary of what was done"]),
)
def test_no_orphan_and_never_over_the_budget_unless_the_pinned_part_is(msgs, keep, budget, large, roles, summary):
    policy = Policy(keep_rounds=keep, large_tokens=large, roles=roles, max_tokens=budget, max_messages=30)
    d = decide(msgs, policy, budget=budget, new_id=counter_id())
    if d.path == CompactionPath.UNCHANGED:
        out = msgs
    elif d.path == CompactionPath.CLEAR and d.draft is not None:
        out = d.draft.messages
        assert len(out) == len(msgs)
        for before, after in zip(msgs, out):
            assert after.get("tool_calls") == before.get("tool_calls")
            assert after == before or is_marker(after["content"])
    elif d.path == FILL:
        seg = fill(d.layout, budget, summary) or fill(d.layout, budget)
        out = seg.messages
    else:
        out = d.segment.messages
    assert orphans(out) == (set(), set())
    assert [m for m in msgs if m.get("pinned")] == [m for m in out if m.get("pinned")]
    if d.path == CompactionPath.OVER:
        assert d.pinned_tokens > budget or len(out) > policy.max_messages or total_tokens(out) > budget
    elif d.trigger is not None:
        assert total_tokens(out) <= budget and len(out) <= policy.max_messages
