"""A person's change to one memory, inside a caller's transaction: what the inspector, the
Markdown read-back and the review queue each write when a person edits, confirms or accepts."""

from __future__ import annotations

from typing import Any

from sqlmodel import Session as DBSession

from dreamer.core.models import Memory, utcnow
from dreamer.store.cabinet import record_event, restorable
from dreamer.store.gate import set_memory_text


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
    steering = None
    if text is not None:
        old = m.text
        steering = set_memory_text(m, text, writer="person")
        data["text"] = [old, m.text]
    if text is not None or vouched:
        m.source = "human"
    if steering:  # a person's text is theirs to keep, never to serve as an order: it waits for review
        status, reason = ("review_required" if status == "verified" else status), f"{reason}; untrusted: {steering}"
        data["status"] = [data["status"][0], status]
    m.status, m.updated_at, m.indexed_at = status, utcnow(), None
    s.add(m)
    record_event(s, m.id, event, reason=reason, data=data)
