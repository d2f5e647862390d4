"""Memory modes, as policy (pure): which memory a read asks and a write feeds in each mode, and
how the results of two sources are merged, each labelled with where it came from."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from dreamer.core.consolidate import normalise
from dreamer.core.settings.modes import MemoryMode

T = TypeVar("T")

OFF_NOTE = "memory mode is off: nothing was read or written"


def reads_builtin(memory_mode: MemoryMode) -> bool:
    return memory_mode in ("builtin", "both")


def reads_external(memory_mode: MemoryMode) -> bool:
    return memory_mode in ("external", "both")


def writes_builtin(memory_mode: MemoryMode) -> bool:
    return memory_mode in ("builtin", "both")


def writes_external(memory_mode: MemoryMode) -> bool:
    return memory_mode in ("external", "both")


def interleave(sources: Sequence[Sequence[T]], text: Callable[[T], str], limit: int) -> list[T]:
    """The sources' results taken in turn (the best of each first, then the second of each...),
    a result saying what an earlier one said (same text, normalised) left out; at most `limit`."""
    out: list[T] = []
    seen: set[str] = set()
    for rank in range(max((len(s) for s in sources), default=0)):
        for source in sources:
            if rank >= len(source):
                continue
            key = normalise(text(source[rank]))
            if key in seen:
                continue
            seen.add(key)
            out.append(source[rank])
            if len(out) >= limit:
                return out
    return out
