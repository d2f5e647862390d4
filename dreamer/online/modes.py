"""Recall, the context block and writes in the configured memory mode (`memory_mode`).

* builtin: the dreamer's own memory, as always.
* external: the provider's (`rt.provider`, behind its guard); while it fails or its breaker is
  open, recall answers from the dreamer's own memory and says so.
* both: the provider's prefetch runs beside the dreamer's own search, waited for only until its
  deadline; the results are merged (`core.memory_modes.interleave`), each labelled with its source.
* off: nothing is read or written, and every answer says so.

Writes (appended turns, agent writes) go to the dreamer's store in builtin and both, and are
queued for the provider's background sync in external and both."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dreamer.core.memory_modes import OFF_NOTE, interleave, reads_builtin, writes_builtin, writes_external
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import context_markers, new_block_id
from dreamer.core.tokens import count_tokens
from dreamer.core.trust.memory_text import as_data
from dreamer.engine.code_work.served import context_line
from dreamer.engine.runtime import Runtime
from dreamer.online.code_work.served import context_with_work, kept_work, standing_work, with_code_work
from dreamer.online.recall import context, cut_to_budget, recall
from dreamer.providers.contract import ProviderHit, Turn
from dreamer.providers.guard import ProviderGuard

Answer = dict[str, Any]
BUILTIN = "builtin"
CONTEXT_QUERY = "what the user prefers, who they are and what they are working on"


def _guard(rt: Runtime) -> ProviderGuard:
    guard = rt.provider
    if guard is None:  # only asked in the external and both modes, where it is always built
        raise RuntimeError("no provider in this memory mode")
    return guard


def external_hit(name: str, h: ProviderHit, rank: int) -> Answer:
    return {"memory_id": f"{name}:{h.id}", "text": h.text, "kind": "external", "score": round(h.score, 6), "rank": rank}


def modal_recall(
    rt: Runtime, query: str, scope: Scope, *, k: int | None = None, project: str | None = None, **filters: Any
) -> Answer:
    """Recall in the configured memory mode; in external and both each hit says its `source`. With a
    `project`, its code work matching the query comes beside the hits (`code_work`), in every
    mode but off."""
    found = _modal_hits(rt, query, scope, k=k, **filters)
    return found if rt.settings.memory_mode == "off" else with_code_work(rt, found, scope.user_id, project, query)


def _modal_hits(rt: Runtime, query: str, scope: Scope, *, k: int | None = None, **filters: Any) -> Answer:
    memory_mode = rt.settings.memory_mode
    if memory_mode == "off":
        return {"query": query, "mode": "off", "memory_mode": memory_mode, "note": OFF_NOTE, "hits": []}
    if memory_mode == BUILTIN:
        return recall(rt, query, scope, k=k, **filters).as_json()
    k = k or rt.settings.recall_k
    guard = _guard(rt)
    fetch = guard.start(query, scope, k)  # runs beside the dreamer's own search
    own = recall(rt, query, scope, k=k, **filters).as_json() if memory_mode == "both" else None
    found, why = guard.collect(fetch)
    if why is not None and own is None:  # external, and the provider failed: the dreamer's own answers
        own = recall(rt, query, scope, k=k, **filters).as_json()
        note = f"provider {guard.name} unavailable ({why}): answered from builtin memory"
    else:
        note = f"provider {guard.name}: {why}" if why else ""
    mine = [{**h, "source": BUILTIN} for h in (own or {}).get("hits", [])]
    theirs = [{**external_hit(guard.name, h, i), "source": guard.name} for i, h in enumerate(found, start=1)]
    hits = interleave([mine, theirs] if own is not None else [theirs], lambda h: str(h["text"]), k)
    base = own or {"query": query, "mode": "external"}
    notes = "; ".join(n for n in (base.get("note", ""), note) if n)
    return {**base, "memory_mode": memory_mode, "note": notes, "provider": guard.status()["breaker"], "hits": hits}


def modal_context(rt: Runtime, scope: Scope, budget: int | None = None, project: str | None = None) -> Answer:
    """The context block in the configured memory mode; in external and both each line says its source.
    With a `project`, its code work follows the memories (`code_work_ids`), in every mode but off."""
    memory_mode = rt.settings.memory_mode
    if memory_mode == "off":
        return {"text": "", "memory_ids": [], "tokens": 0, "memory_mode": memory_mode, "note": OFF_NOTE}
    if memory_mode == BUILTIN:
        return context_with_work(rt, scope, project, budget)
    guard = _guard(rt)
    fetch = guard.start(CONTEXT_QUERY, scope, rt.settings.recall_k)
    block_id = new_block_id()
    own = context(rt, scope, budget_tokens=budget, block_id=block_id) if reads_builtin(memory_mode) else None
    found, why = guard.collect(fetch)
    opening, closing = context_markers(block_id)
    mine = [f"{line} [{BUILTIN}]" for line in (own.text.splitlines()[1:-1] if own and own.text else [])]
    theirs = [f"- {as_data(h.text)} [{guard.name}]" for h in found]
    lines = interleave([mine, theirs], lambda line: line.rsplit(" [", 1)[0], len(mine) + len(theirs))
    work = standing_work(rt, scope.user_id, project)
    limit = budget if budget is not None else rt.settings.context_budget
    overhead = count_tokens(opening) + count_tokens(closing) + 2
    kept = cut_to_budget([*lines, *(context_line(h) for h in work)], limit, overhead=overhead)
    text = "\n".join([opening, *kept, closing]) if kept else ""
    note = f"provider {guard.name}: {why}" if why else ""
    ids = own.memory_ids if own else []
    answer = {"text": text, "memory_ids": ids, "tokens": count_tokens(text), "memory_mode": memory_mode, "note": note}
    return kept_work(answer, project, work, max(0, len(kept) - len(lines)))


def said_turns(messages: Sequence[dict[str, Any]]) -> list[tuple[str, str]]:
    """(role, text) of each appended message that says something in text."""
    return [(m["role"], m["content"]) for m in messages if isinstance(m.get("content"), str) and m["content"].strip()]


def modal_write(rt: Runtime, scope: Scope, turns: Sequence[tuple[str, str]]) -> Answer | None:
    """Queue `turns` (role, content) for the provider where the mode syncs them; the answer to give
    instead of the dreamer's own write where the mode writes nothing there (external, off), else None."""
    memory_mode = rt.settings.memory_mode
    if writes_external(memory_mode) and turns:
        _guard(rt).push([Turn(scope, role, content) for role, content in turns])
    if writes_builtin(memory_mode):
        return None
    if memory_mode == "off":
        return {"memory_mode": memory_mode, "stored": 0, "synced": 0, "note": OFF_NOTE}
    name = _guard(rt).name
    note = f"memory mode is external: queued for {name}, not stored by the dreamer"
    return {"memory_mode": memory_mode, "stored": 0, "synced": len(turns), "note": note}


def modes_status(rt: Runtime) -> Answer:
    """The memory mode and, with a provider, its breaker and sync queue."""
    out: Answer = {"memory_mode": rt.settings.memory_mode}
    if rt.settings.memory_mode in ("external", "both"):
        out["provider"] = _guard(rt).status()
    return out
