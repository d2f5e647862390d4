"""What every external memory provider offers, and what it hands back."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from dreamer.core.scope import Scope


@dataclass(frozen=True)
class ProviderHit:
    """One memory a provider found for a query."""

    id: str
    text: str
    score: float


@dataclass(frozen=True)
class Turn:
    """One message pushed to a provider, with whose it is."""

    scope: Scope
    role: str
    content: str


@runtime_checkable
class Provider(Protocol):
    """An external memory. `prefetch` finds what is relevant to a query within a scope; `sync`
    stores turns (called in the background, in batches); both raise on failure."""

    name: str

    def prefetch(self, query: str, scope: Scope, k: int) -> list[ProviderHit]: ...

    def sync(self, turns: Sequence[Turn]) -> None: ...

    def close(self) -> None: ...
