"""A change nobody judged: the held memory is served right after the newer value that may
replace it, both labelled "may have changed"."""

from __future__ import annotations

from dreamer.core.models import Memory
from dreamer.store.held import beside_successor


def memory(mid: str, text: str) -> Memory:
    return Memory(id=mid, user_id="u", kind="profile", text=text, content_hash=mid)


def test_a_held_memory_follows_the_value_that_may_replace_it():
    denver, boston, tea = memory("d", "Lives in Denver."), memory("b", "Lives in Boston."), memory("t", "Likes tea.")
    ranked = beside_successor([denver, tea], {"b": boston}, {"b": "d", "d": "b"})
    assert [m.id for m in ranked] == ["d", "b", "t"]


def test_a_held_memory_whose_successor_is_not_served_comes_last():
    boston, tea = memory("b", "Lives in Boston."), memory("t", "Likes tea.")
    assert [m.id for m in beside_successor([tea], {"b": boston}, {"b": "gone"})] == ["t", "b"]
