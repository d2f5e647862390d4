"""Paging of the inspector's lists: which page a request asks for (`?page=`, `?per=`), and a
page of rows with the total they were cut from, for the pager under each list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import urlencode

from sqlalchemy import func
from sqlmodel import Session as DBSession
from starlette.requests import Request

T = TypeVar("T")
PER_PAGE = 50
PER_CHOICES = (25, 50, 100, 200)
MAX_PAGE = 1_000_000


@dataclass(frozen=True)
class Paging:
    """The page asked for: its number (from 1) and how many rows a page holds."""

    page: int = 1
    per: int = PER_PAGE

    @property
    def offset(self) -> int:
        return (self.page - 1) * self.per

    def cut(self, rows: Sequence[T]) -> Paged[T]:
        """This page of rows held whole in memory."""
        return Paged(list(rows[self.offset : self.offset + self.per]), len(rows), self)


@dataclass
class Paged(Generic[T]):
    """One page of a list: its rows, how many the whole list holds, and which page it is."""

    rows: list[T]
    total: int
    paging: Paging = field(default_factory=Paging)

    @property
    def page(self) -> int:
        return self.paging.page

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.paging.per))

    @property
    def first(self) -> int:
        """The place in the whole list of this page's first row (from 1; 0 for an empty page)."""
        return self.paging.offset + 1 if self.rows else 0

    @property
    def last(self) -> int:
        return self.paging.offset + len(self.rows)

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def has_prev(self) -> bool:
        return self.page > 1


def paging_of(request: Request) -> Paging:
    """The page a request asks for; a missing or bad `page` is the first, a bad `per` the default."""
    params = request.query_params
    page = _number(params.get("page"), 1)
    per = _number(params.get("per"), PER_PAGE)
    return Paging(min(max(page, 1), MAX_PAGE), per if per in PER_CHOICES else PER_PAGE)


def _number(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None else default
    except ValueError:
        return default


def page_link(request: Request, page: int, **extra: str) -> str:
    """The link to another page of the same list: this path with its filters kept (relative,
    so it holds behind a proxy), and `extra` parameters (not a bulk action's outcome or ticks)."""
    dropped = ("page", "done", "n", "refused", "select", *extra)
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in dropped]
    return f"{request.url.path}?{urlencode([*params, ('page', str(page)), *extra.items()])}"


def fetch_page(s: DBSession, q: Any, paging: Paging) -> Paged[Any]:
    """One page of a select (ordered by the caller) and the count of all its rows."""
    counted = q.with_only_columns(func.count(), maintain_column_froms=True).order_by(None)
    total = s.execute(counted).scalar_one()
    rows = list(s.exec(q.offset(paging.offset).limit(paging.per)).all())
    return Paged(rows, int(total), paging)
