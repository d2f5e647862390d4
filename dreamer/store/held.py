"""Changes that wait for a person: a current memory whose supersession was held (its status
`review_required`, its latest `hold` event naming the successor). Both sides of such a pair are
current and "may have changed": recall and the context block say so, and the review queue holds
the pair until a person accepts or rejects the change."""

from __future__ import annotations

from typing import Protocol, TypeVar

from sqlalchemy.engine import Connection
from sqlmodel import Session as DBSession
from sqlmodel import col, select

from dreamer.core.models import Memory, MemoryEvent

MAY_HAVE_CHANGED = "may have changed"


class Paired(Protocol):
    """What `newer_first` reads of a hit."""

    memory_id: str
    status: str
    changed_with: str | None


P = TypeVar("P", bound=Paired)


def newer_first(hits: list[P]) -> list[P]:
    """`hits` in order, but a held memory ranked above the newer value that may replace it
    trades places with it: of a change waiting for a person, the newer side is read first."""
    out = list(hits)
    place = {h.memory_id: i for i, h in enumerate(out)}
    for h in hits:
        j = place.get(h.changed_with or "")
        if h.status == "review_required" and j is not None and j > place[h.memory_id]:
            k = place[h.memory_id]
            out[k], out[j] = out[j], out[k]
            place[out[k].memory_id], place[out[j].memory_id] = k, j
    return out


def held_changes(s: DBSession | Connection, user_id: str) -> dict[str, str]:
    """Each held memory of `user_id` with the successor its latest hold names."""
    q = (
        select(MemoryEvent.memory_id, MemoryEvent.data)
        .join(Memory, col(Memory.id) == col(MemoryEvent.memory_id))
        .where(col(Memory.user_id) == user_id, col(Memory.status) == "review_required")
        .where(col(MemoryEvent.event) == "hold")
        .order_by(col(MemoryEvent.id))
    )
    rows = s.execute(q).all() if isinstance(s, Connection) else s.exec(q).all()
    latest: dict[str, str] = {}
    for memory_id, data in rows:
        by = (data or {}).get("by") if isinstance(data, dict) else None
        if by:
            latest[str(memory_id)] = str(by)
    return latest


def changing(s: DBSession | Connection, user_id: str) -> dict[str, str]:
    """Each memory of `user_id` on either side of a held change, with the other side: the held
    memory with its successor, the successor with (the first of) the memories it would replace."""
    out: dict[str, str] = {}
    for held, by in held_changes(s, user_id).items():
        out[held] = by
        out.setdefault(by, held)
    return out


def beside_successor(ranked: list[Memory], held: dict[str, Memory], pairs: dict[str, str]) -> list[Memory]:
    """`ranked` with each `held` memory (whose change waits for a person) right after the newer
    value that may replace it, or last when that one is not served."""
    out: list[Memory] = []
    placed: set[str] = set()
    for m in ranked:
        out.append(m)
        for h in held.values():
            if pairs.get(h.id) == m.id and h.id not in placed:
                out.append(h)
                placed.add(h.id)
    return out + [h for h in held.values() if h.id not in placed]
