"""The context meter's running state, kept on the session row as its messages are stored.

A live agent marks the messages it appends (``meta.meter``): ``compacted`` on the first message
after it compacted its context, ``context_tokens`` (the size of its context as it reported it)
on the last message of a batch. The meter needs, at every append, the current compaction cycle
and the tokens of the active context: the last figure reported in this cycle plus the tokens of
the messages after it, else the tokens of every message since the cycle started.

Rather than scan a session's messages for marks and sum their tokens on every read (a cost that
grows with the session), the session row keeps a running total of its tokens and the meter's
base, advanced in the transaction that stores the messages (`advance`). The meter then reads in
O(1): tokens = ``figure + total - base``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

METER_KEY = "meter"
MAX_FIGURE = 2**31 - 1  # a reported context size above this is not one (and would not fit the row's columns)


@dataclass(frozen=True)
class MeterState:
    """What the session row keeps.

    `total`: the tokens of all its messages; `cycle`: how many compactions were marked;
    `figure`: the tokens the agent last reported in this cycle (0 when none yet);
    `base`: `total` as it was right after the message that reported `figure` (or right before
    the message that opened the cycle)."""

    total: int = 0
    cycle: int = 0
    figure: int = 0
    base: int = 0

    @property
    def tokens(self) -> int:
        """The tokens of the active context."""
        return self.figure + self.total - self.base

    @classmethod
    def of(cls, row: Any) -> MeterState:
        """The state a session row keeps."""
        return cls(row.token_total, row.meter_cycle, row.meter_figure, row.meter_base)

    def columns(self) -> dict[str, int]:
        """The session row's columns holding this state."""
        return {
            "token_total": self.total,
            "meter_cycle": self.cycle,
            "meter_figure": self.figure,
            "meter_base": self.base,
        }


def mark_of(meta: Any) -> dict[str, Any]:
    """A message's meter mark (empty when it carries none, or something else under the key)."""
    mark = meta.get(METER_KEY) if isinstance(meta, dict) else None
    return mark if isinstance(mark, dict) else {}


def reported(mark: dict[str, Any]) -> int | None:
    """The context size a mark reports, if it holds a valid one (an int from 0 to `MAX_FIGURE`)."""
    figure = mark.get("context_tokens")
    if isinstance(figure, int) and not isinstance(figure, bool) and 0 <= figure <= MAX_FIGURE:
        return figure
    return None


def advance(state: MeterState, messages: Iterable[tuple[int, Any]]) -> MeterState:
    """The state after storing `messages`, (token count, meta) in seq order: a compaction opens a
    new cycle counted from just before its message; a reported figure is counted from just after
    its message (a message may do both: the compaction first)."""
    total, cycle, figure, base = state.total, state.cycle, state.figure, state.base
    for tokens, meta in messages:
        mark = mark_of(meta)
        if mark.get("compacted"):
            cycle, figure, base = cycle + 1, 0, total
        total += int(tokens)
        if (size := reported(mark)) is not None:
            figure, base = size, total
    return MeterState(total, cycle, figure, base)
