"""Which path a compaction takes, pure: ``unchanged`` when it fits or nothing is due, ``clear``
when clearing old tool output fits the budget (the recent rounds' too, when need be), ``over`` (every turn but the pinned part
offloaded) when the pinned part alone does not, else a fill of the budget newest first
(`dreamer.core.compaction.fill`), summarised by the caller's model or not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dreamer.core.compaction.fill import Layout, Segment, assemble, fill, layout_of, pinned_tokens
from dreamer.core.compaction.plan import CompactionPath, Draft, clearing_draft, fits, new_offload_id
from dreamer.core.compaction.policy import Msg, Policy, due, total_tokens

BUDGET_TRIGGER = "budget"


@dataclass
class Decision:
    """A compaction's path; the clearing `draft` of a ``clear``, the `layout` a fill works on
    (``fill``) or the `segment` of an ``over``, and the pinned part's tokens."""

    path: CompactionPath | str
    trigger: str | None
    budget: int
    tokens_before: int
    draft: Draft | None = None
    layout: Layout | None = None
    segment: Segment | None = None
    pinned_tokens: int = 0


FILL = "fill"  # the budget is filled newest first; the caller summarises or not


def decide(
    messages: Sequence[Msg],
    policy: Policy,
    budget: int | None = None,
    new_id: Callable[[], str] = new_offload_id,
    env_state: str | None = None,
) -> Decision:
    goal = policy.target_tokens if budget is None else budget
    before = total_tokens(messages, policy.counter)
    trigger = due(messages, policy)
    if trigger is None and budget is not None and before > budget:
        trigger = BUDGET_TRIGGER
    if trigger is None or fits(messages, goal, policy):
        return Decision(CompactionPath.UNCHANGED, trigger, goal, before)
    draft = clearing_draft(messages, policy, goal, new_id)
    if draft.offloads and fits(draft.messages, goal, policy):
        return Decision(CompactionPath.CLEAR, trigger, goal, before, draft)
    layout = layout_of(messages, policy, new_id, env_state)
    pinned = pinned_tokens(layout)
    least = assemble(layout, {}, None, False)
    if not fits(least.messages, goal, policy):
        return Decision(CompactionPath.OVER, trigger, goal, before, layout=layout, segment=least, pinned_tokens=pinned)
    whole = fill(layout, goal)
    if whole is not None and whole.offloaded is None:  # every turn fits once the recent rounds are cleared too
        return Decision(CompactionPath.CLEAR, trigger, goal, before, layout=layout, segment=whole, pinned_tokens=pinned)
    return Decision(FILL, trigger, goal, before, layout=layout, pinned_tokens=pinned)
