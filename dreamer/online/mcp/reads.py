"""What the MCP server's read tools look up: one memory the caller may see, a listing, a trace."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import col, select

from dreamer.core.errors import NotFound
from dreamer.core.models import CURRENT_STATUSES, Memory
from dreamer.core.scope import Scope
from dreamer.engine.runtime import Runtime
from dreamer.online.schemas import memory_json
from dreamer.online.trace import trace
from dreamer.store.db import session_scope

Answer = dict[str, Any]


def jsonable(value: dict[str, Any]) -> Answer:
    """`value` as JSON carries it (times and other values as text)."""
    answer: Answer = json.loads(json.dumps(value, default=str))
    return answer


def owned_memory(rt: Runtime, scope: Scope, memory_id: str) -> Memory:
    """The memory `memory_id` when the scope may see it; NotFound otherwise (also another's)."""
    with session_scope(rt.engine) as s:
        m = s.get(Memory, memory_id)
    if m is None or not scope.matches(m):
        raise NotFound(f"no memory {memory_id}")
    return m


def listed_memories(rt: Runtime, scope: Scope, kind: str | None, include_all: bool, limit: int) -> list[Answer]:
    """The scope's memories, newest change first: current ones, or all with `include_all`."""
    q = scope.where(select(Memory), Memory)
    if kind is not None:
        q = q.where(Memory.kind == kind)
    if not include_all:
        q = q.where(col(Memory.status).in_(CURRENT_STATUSES))
    with session_scope(rt.engine) as s:
        rows = s.exec(q.order_by(col(Memory.updated_at).desc(), col(Memory.id)).limit(limit)).all()
    return [memory_json(m) for m in rows]


def traced(rt: Runtime, fact: str, scope: Scope) -> Answer:
    """A fact's hops from the ledger to the workbench, as the `trace` tool answers them."""
    found = trace(rt, fact, scope.user_id, scope=scope)
    data = found.as_json()
    return {key: data[key] for key in ("fact", "said", "memories", "code_work", "hops", "recall_mode", "recall_k")}
