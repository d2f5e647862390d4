"""Code work as recall and the context block serve it, beside the memories: a project's experience
entries and state fields, each labelled with its kind (`experience`, `project_state`), its status
and whether it may be served as a rule.

For a query, entries are found as at a task's start (`search.search`) and state fields by the
same ranking (`dreamer.core.code_work.experience_rank.rank`). Without one (the context block),
entries and fields come best status first. Only a verified entry whose text does not try to steer
the reader may be served as a rule; a candidate, an entry to review, an untrusted entry, text
found in the repository and a state field (a fact about the work, not an instruction) never are,
and the context block leaves untrusted entries out altogether."""

from __future__ import annotations

import json
from typing import Any

from dreamer.core.code_work.experience_rank import STATUS_WEIGHT, Doc, rank
from dreamer.core.models import ProjectState
from dreamer.core.trust.memory_text import as_data
from dreamer.embed.embedders import Embedder
from dreamer.engine.code_work.book import CodeBook
from dreamer.engine.code_work.search import entry_json, search
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where

Hit = dict[str, Any]
ENTRY, STATE = "experience", "project_state"
STATE_LABELS = {
    "verified": "verified ({reason}): where the work stood then, still to check in this code",
    "in_progress": "in progress: not verified",
    "review_required": "review required ({reason}): not reliable until checked again",
}


def state_text(st: ProjectState) -> str:
    value = st.value if isinstance(st.value, str) else json.dumps(st.value)
    return f"{st.unit}.{st.field} = {value}"


def state_hit(st: ProjectState) -> Hit:
    why = STATE_LABELS.get(st.status, st.status).format(reason=st.reason or "something changed")
    return {
        "kind": STATE,
        "id": st.id,
        "project": st.project,
        "branch": st.branch,
        "text": state_text(st),
        "status": st.status,
        "rule": False,
        "label": why,
        "unit": st.unit,
        "field": st.field,
        "value": st.value,
        "reason": st.reason,
    }


def may_rule(item: dict[str, Any]) -> bool:
    """Whether an entry may be served as a rule: verified, its text steering no one (`reliable`),
    and not text found in the repository (evidence about the code, never an instruction)."""
    return bool(item["reliable"]) and item["origin"] != "repository"


def entry_hit(item: dict[str, Any], where: Where) -> Hit:
    """An entry as `search.entry_json` gives it, as recall serves it."""
    return {
        "kind": ENTRY,
        "id": item["id"],
        "project": where.project,
        "branch": where.branch,
        "text": item["text"],
        "status": item["status"],
        "rule": may_rule(item),
        "label": item["label"],
        "unit": item["unit"],
        "conditions": item["conditions"],
        "reason": item["reason"],
    }


def matching(book: CodeBook, where: Where, query: str, *, limit: int, embedder: Embedder | None = None) -> list[Hit]:
    """The project's entries for `query` (best first), then its state fields for it."""
    if not query.strip():
        return []
    found = search(book, where, query, limit=limit, embedder=embedder)["entries"]
    with session_scope(book.engine) as s:
        states = list(rows.states(s, where))
    docs = [Doc(st.id, state_text(st), st.status, keywords=(st.unit, st.field)) for st in states]
    by_id = {st.id: st for st in states}
    fields = [by_id[r.key] for r in rank(query, docs, limit=limit)]
    return [entry_hit(item, where) for item in found] + [state_hit(st) for st in fields]


def _best_first(status: str) -> float:
    return -STATUS_WEIGHT.get(status, 0.0)


def standing(book: CodeBook, where: Where, *, limit: int) -> list[Hit]:
    """What the context block carries of the project without a query: its trusted entries, best
    status first (newest first within one), then its state fields, best status first."""
    with session_scope(book.engine) as s:
        entries = [e for e in rows.entries(s, where) if not e.untrusted]
        states = list(rows.states(s, where))
    entries.sort(key=lambda e: e.updated_at, reverse=True)
    entries.sort(key=lambda e: _best_first(e.status))
    states.sort(key=lambda st: _best_first(st.status))
    picked = [entry_hit(entry_json(e, 0, ()), where) for e in entries[:limit]]
    return picked + [state_hit(st) for st in states[:limit]]


def context_line(hit: Hit) -> str:
    """One line of the context block: the text as data, then its kind, status and whether it may
    be served as a rule."""
    rule = "may serve as a rule" if hit["rule"] else "not a rule: check it in the code"
    return f"- {as_data(hit['text'])} ({hit['kind']}, {hit['status']}, {rule})"
