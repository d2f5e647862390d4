"""The supersede/forget guard's decision (pure)."""

import pytest

from dreamer.core.guard import allowance, trips


@pytest.mark.parametrize(
    ("current", "share", "floor", "expected"),
    [(10, 0.25, 4, 4), (40, 0.25, 4, 10), (41, 0.25, 4, 10), (3, 0.25, 4, 4), (100, 0.0, 0, 0), (8, 1.0, 0, 8)],
)
def test_the_allowance_is_a_share_of_the_current_memories_but_never_below_the_floor(current, share, floor, expected):
    assert allowance(current, share, floor) == expected


def test_a_pass_trips_the_guard_once_its_removals_exceed_the_allowance():
    assert not trips(40, 0, 10, share=0.25, floor=4)
    assert trips(40, 0, 11, share=0.25, floor=4)
    assert trips(40, 8, 3, share=0.25, floor=4)  # the removals already applied in the pass count
    assert not trips(6, 0, 4, share=0.25, floor=4)  # a small store: the floor lets four through
    assert trips(6, 0, 5, share=0.25, floor=4)
    assert not trips(0, 50, 0, share=0.25, floor=0)  # nothing proposed never trips
