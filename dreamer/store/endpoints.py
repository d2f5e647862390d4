"""What was learnt of a model at an endpoint (`LLMEndpoint`): read when a process builds its
client, written when the client finds the mode that answers or `dreamer llm check` measures."""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from dreamer.core.models import LLMEndpoint, utcnow
from dreamer.store.db import session_scope
from dreamer.store.gate import set_columns


def learnt(engine: Engine, base_url: str, model: str) -> LLMEndpoint | None:
    """The record of `model` at `base_url`, if any (detached: safe to read after)."""
    with session_scope(engine) as s:
        row = s.get(LLMEndpoint, (base_url, model))
        if row is not None:
            s.expunge(row)
        return row


def remember(engine: Engine, base_url: str, model: str, **facts: Any) -> None:
    """Set `facts` (mode, context_window, window_source, checked_seconds, checked_tokens) on the
    record of `model` at `base_url`, creating it if needed. Two processes that create it at once
    (two workers starting): the second finds the first's row and updates it."""
    try:
        _set(engine, base_url, model, facts)
    except IntegrityError:
        _set(engine, base_url, model, facts)


def _set(engine: Engine, base_url: str, model: str, facts: dict[str, Any]) -> None:
    with session_scope(engine) as s:
        row = s.get(LLMEndpoint, (base_url, model)) or LLMEndpoint(base_url=base_url, model=model)
        for key in facts:
            if not hasattr(LLMEndpoint, key):
                raise ValueError(f"no endpoint fact {key!r}")
        set_columns(row, facts)
        row.updated_at = utcnow()
        s.add(row)
