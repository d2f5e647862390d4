"""Whose memories a read or a write may touch: one user, optionally narrowed to an agent, a
project or a team. Every index query, SQL read and write check goes through this one type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, Self, TypeVar

from dreamer.core.errors import ScopeRequired

OWNER_FIELDS = ("agent_id", "project", "team")  # with user_id, who a memory or a session belongs to


class Owned(Protocol):
    """A row with an owner: a memory or a session."""

    @property
    def user_id(self) -> str: ...

    @property
    def agent_id(self) -> str | None: ...

    @property
    def project(self) -> str | None: ...

    @property
    def team(self) -> str | None: ...


class Filterable(Protocol):
    """A query that `where` narrows (a SQLAlchemy or SQLModel select)."""

    def where(self, *clauses: Any) -> Self: ...


Q = TypeVar("Q", bound=Filterable)


@dataclass(frozen=True)
class Scope:
    """Whose memories a search may see. `None` on agent/project/team means any."""

    user_id: str
    agent_id: str | None = None
    project: str | None = None
    team: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.user_id, str) or not self.user_id.strip():
            raise ScopeRequired("a search scope needs a non-empty user_id")

    def narrowing(self) -> dict[str, str]:
        """The owner fields this scope pins (agent, project, team), with their values."""
        return {f: v for f in OWNER_FIELDS if (v := getattr(self, f)) is not None}

    def matches(self, row: Owned) -> bool:
        """Whether the row is this user's and agrees with every field the scope pins."""
        return row.user_id == self.user_id and all(getattr(row, f) == v for f, v in self.narrowing().items())

    def owns(self, row: Owned) -> bool:
        """Whether the row belongs to exactly this scope: a None field must be None on the row too."""
        return row.user_id == self.user_id and all(getattr(row, f) == getattr(self, f) for f in OWNER_FIELDS)

    def where(self, query: Q, table: Any) -> Q:
        """`query` narrowed in SQL to the rows of `table` this scope sees."""
        q = query.where(table.user_id == self.user_id)
        for f, v in self.narrowing().items():
            q = q.where(getattr(table, f) == v)
        return q
