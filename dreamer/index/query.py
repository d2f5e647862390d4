"""What a search asks of the index, independent of the backend: its filter conditions (the scope
first, then the optional `SearchFilter`), one builder that turns them into a backend's filter,
and the payload fields each hit returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from dreamer.core.scope import OWNER_FIELDS, Scope
from dreamer.index.contract import TIME_FIELD, SearchFilter, point_id


@dataclass(frozen=True)
class Equals:
    """The field holds exactly this value."""

    key: str
    value: str


@dataclass(frozen=True)
class AnyOf:
    """The field holds one of these values."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class InRange:
    """The field is a float in [gte, lt); a None bound is open."""

    key: str
    gte: float | None
    lt: float | None


@dataclass(frozen=True)
class Empty:
    """The field is missing or null."""

    key: str


Condition = Equals | AnyOf | InRange | Empty

C = TypeVar("C")
F_co = TypeVar("F_co", covariant=True)


class FilterTerms(Protocol[C, F_co]):
    """A backend's filter vocabulary: one method per kind of condition, and the conjunction."""

    def has_id(self, point_ids: list[str]) -> C: ...

    def equals(self, key: str, value: str) -> C: ...

    def any_of(self, key: str, values: list[str]) -> C: ...

    def in_range(self, key: str, gte: float | None, lt: float | None) -> C: ...

    def is_empty(self, key: str) -> C: ...

    def all_of(self, must: list[C]) -> F_co: ...


def conditions(scope: Scope, flt: SearchFilter | None) -> list[Condition]:
    """The must-conditions of a search: the scope first, then the optional filter."""
    conds: list[Condition] = [Equals("user_id", scope.user_id)]
    pinned = scope.narrowing()
    for key in OWNER_FIELDS:
        if key in pinned:
            conds.append(Equals(key, pinned[key]))
        elif flt is not None and flt.exact_scope:
            conds.append(Empty(key))
    if flt is None:
        return conds
    if flt.kinds is not None:
        conds.append(AnyOf("kind", tuple(flt.kinds)))
    if flt.statuses is not None:
        conds.append(AnyOf("status", tuple(flt.statuses)))
    if flt.since is not None or flt.until is not None:
        conds.append(InRange(TIME_FIELD, gte=flt.since, lt=flt.until))
    return conds


def build_filter(
    terms: FilterTerms[C, F_co], conds: Sequence[Condition], memory_ids: Sequence[str] | None = None
) -> F_co:
    """The conditions in a backend's terms; with `memory_ids`, only those memories."""
    must = [] if memory_ids is None else [terms.has_id([point_id(m) for m in memory_ids])]
    for cond in conds:
        if isinstance(cond, Empty):
            must.append(terms.is_empty(cond.key))
        elif isinstance(cond, AnyOf):
            must.append(terms.any_of(cond.key, list(cond.values)))
        elif isinstance(cond, InRange):
            must.append(terms.in_range(cond.key, cond.gte, cond.lt))
        else:
            must.append(terms.equals(cond.key, cond.value))
    return terms.all_of(must)


def hit_fields(flt: SearchFilter | None) -> list[str] | None:
    """The payload fields a search returns per hit; None means the whole payload."""
    if flt is None or flt.payload_fields is None:
        return None
    return list(dict.fromkeys(["memory_id", *flt.payload_fields]))


def matches_nothing(flt: SearchFilter | None) -> bool:
    """An empty kinds or statuses list allows no memory at all."""
    if flt is None:
        return False
    return (flt.kinds is not None and len(flt.kinds) == 0) or (flt.statuses is not None and len(flt.statuses) == 0)
