"""The supersede/forget guard: how many current memories of a user one pass may take away
before a person has to look (pure)."""

from __future__ import annotations

import math


def allowance(current: int, share: float, floor: int) -> int:
    """How many of a user's `current` memories a pass may supersede or forget unreviewed: a
    `share` of them, but never fewer than `floor` (a small store is not blocked)."""
    return max(floor, math.floor(share * current))


def trips(current: int, already: int, proposed: int, *, share: float, floor: int) -> bool:
    """Whether `proposed` more removals, after `already` applied in the same pass, exceed the
    allowance of a user who had `current` memories when the pass first touched them."""
    return proposed > 0 and already + proposed > allowance(current, share, floor)
