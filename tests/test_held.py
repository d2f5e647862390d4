"""A change nobody judged: the held memory is served right after the newer value that may
replace it, both labelled "may have changed"."""

from __future__ import annotations

from dataclasses import dataclass

from dreamer.core.models import Memory
from dreamer.store.held import beside_successor, newer_first


def memory(mid: str, text: str) -> Memory:
    return Memory(id=mid, user_id="u", kind="profile", text=text, content_hash=mid)


def test_a_held_memory_follows_the_value_that_may_replace_it():
    denver, boston, tea = memory("d", "Lives in Denver."), memory("b", "Lives in Boston."), memory("t", "Likes tea.")
    ranked = beside_successor([denver, tea], {"b": boston}, {"b": "d", "d": "b"})
    assert [m.id for m in ranked] == ["d", "b", "t"]


def test_a_held_memory_whose_successor_is_not_served_comes_last():
    boston, tea = memory("b", "Lives in Boston."), memory("t", "Likes tea.")
    assert [m.id for m in beside_successor([tea], {"b": boston}, {"b": "gone"})] == ["t", "b"]


@dataclass
class Hit:
    memory_id: str
    status: str
    changed_with: str | None = None


def test_of_a_change_waiting_for_a_person_the_newer_side_is_read_first():
    hits = [Hit("old", "review_required", "new"), Hit("tea", "candidate"), Hit("new", "candidate", "old")]
    assert [h.memory_id for h in newer_first(hits)] == ["new", "tea", "old"]
    settled = [Hit("new", "candidate", "old"), Hit("old", "review_required", "new")]
    assert [h.memory_id for h in newer_first(settled)] == ["new", "old"]
