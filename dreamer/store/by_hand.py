"""A person's change to one memory, inside a caller's transaction: what the inspector, the
Markdown read-back and the review queue each write when a person edits, confirms or accepts."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session as DBSession

from dreamer.core.consolidate import content_hash
from dreamer.core.models import Memory, utcnow
from dreamer.store.cabinet import record_event, restorable


def set_by_hand(
    s: DBSession,
    m: Memory,
    event: str,
    *,
    status: str,
    reason: str,
    text: str | None = None,
    vouched: bool = False,
    where: dict[str, Any] | None = None,
) -> None:
    """Give `m` the person's `status` (and `text`, which makes it theirs: source `human`), the
    values it had in its history row so the change can be undone; `vouched` makes it theirs
    without new text (a confirm read back from their file). It is indexed again on the next drain."""
    data: dict[str, Any] = {"status": [m.status, status], "before": restorable(m), **(where or {})}
    if text is not None:
        data["text"] = [m.text, text]
        m.text, m.content_hash = text, content_hash(text)
    if text is not None or vouched:
        m.source = "human"
    m.status, m.updated_at, m.indexed_at = status, utcnow(), None
    s.add(m)
    record_event(s, m.id, event, reason=reason, data=data)
