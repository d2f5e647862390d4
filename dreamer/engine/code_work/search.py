"""The task-start read of experience: filtered (project, branch, versions, status), then ranked
(`dreamer.core.code_work.experience_rank`), and returned as a checklist of conditions to verify in the
current code, each entry with its status, label and evidence. A `review_required` entry is
labelled and never served as verified; a candidate is a suggestion to check."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dreamer.core.code_work.experience import ENTRY_STATUSES, REPOSITORY_NOTE, InvalidExperience
from dreamer.core.code_work.experience_rank import Doc, impact, rank
from dreamer.core.models import ExperienceEntry, ProjectState
from dreamer.embed.embedders import Embedder
from dreamer.engine.code_work.book import CodeBook
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where

LABELS = {
    "verified": "verified in {n} unit(s){by}: a default suggestion, still to check in this code",
    "candidate": "candidate from one task: a suggestion of what to check, not verified",
    "review_required": "review required ({reason}): not reliable until confirmed again",
}


def _major(version: str) -> str:
    return version.strip().lstrip("vV^~=").split(".")[0]


def versions_agree(entry: Mapping[str, str], wanted: Mapping[str, str]) -> bool:
    """An entry fits the versions asked for unless one library's major version differs."""
    return all(_major(entry[k]) == _major(v) for k, v in wanted.items() if k in entry)


def label(e: ExperienceEntry) -> str:
    by = f", confirmed by {e.confirmed_by}" if e.confirmed_by else ""
    text = LABELS[e.status].format(n=len(e.verified_units), by=by, reason=e.reason or "something changed")
    if e.untrusted:
        text += "; its text tries to steer the reader: evidence only"
    elif e.note == REPOSITORY_NOTE:
        text += f"; {REPOSITORY_NOTE}"
    return text


def state_units(states: Sequence[ProjectState]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for st in states:
        for t in st.depends_on:
            out.setdefault(t, set()).add(st.unit)
    return out


def _dense(embedder: Embedder | None, query: str, texts: list[str]) -> list[float]:
    if embedder is None or not texts:
        return [0.0] * len(texts)
    vectors = np.asarray(embedder.embed([query, *texts]), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1)
    norms[norms == 0] = 1.0
    unit = vectors / norms[:, None]
    return [float(x) for x in unit[1:] @ unit[0]]


def entry_json(e: ExperienceEntry, consumers: int, exact: Sequence[str]) -> dict[str, Any]:
    return {
        "id": e.id,
        "status": e.status,
        "label": label(e),
        "reliable": e.status == "verified" and not e.untrusted,
        "text": e.text,
        "unit": e.unit,
        "basis": e.basis,
        "origin": e.origin,
        "rule": False,  # experience is a checklist to verify, never an instruction
        "conditions": list(e.conditions),
        "counterexamples": list(e.counterexamples),
        "unverified": list(e.unverified),
        "verified_units": list(e.verified_units),
        "source_tasks": list(e.source_tasks),
        "versions": dict(e.versions),
        "evidence": list(e.evidence),
        "last_confirmed": e.last_confirmed.isoformat() if e.last_confirmed else None,
        "consumers": consumers,
        "matched_keywords": list(exact),
        "reason": e.reason,
    }


def search(
    book: CodeBook,
    where: Where,
    query: str,
    *,
    unit: str | None = None,
    versions: Mapping[str, str] | None = None,
    statuses: Sequence[str] = ENTRY_STATUSES,
    limit: int = 5,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """The entries worth checking for `query` (`unit` is context: it never filters)."""
    if not query.strip():
        raise InvalidExperience("a search needs a query")
    if bad := [st for st in statuses if st not in ENTRY_STATUSES]:
        raise InvalidExperience(f"status {bad[0]!r}: use one of {', '.join(ENTRY_STATUSES)}")
    with session_scope(book.engine) as s:
        pool = [e for e in rows.entries(s, where, statuses) if versions_agree(e.versions, versions or {})]
        users = state_units(rows.states(s, where))
    consumers = {e.id: impact(e.unit, e.depends_on, users) for e in pool}
    dense = _dense(embedder, query, [e.text for e in pool])
    docs = [Doc(e.id, _document(e), e.status, consumers[e.id], _keywords(e), d) for e, d in zip(pool, dense)]
    by_id = {e.id: e for e in pool}
    found = [(by_id[r.key], r.exact) for r in rank(query, docs, limit=limit, context=unit)]
    items = [entry_json(e, consumers[e.id], exact) for e, exact in found]
    return {
        "query": query,
        "project": where.project,
        "branch": where.branch,
        "unit": unit,
        "entries": items,
        "checklist": checklist(items, unit),
    }


def _document(e: ExperienceEntry) -> str:
    return " ".join([e.text, *e.conditions, e.unit or "", *e.keywords])


def _keywords(e: ExperienceEntry) -> tuple[str, ...]:
    names = [t.partition(":")[2] for t in e.depends_on if t.startswith(("interface:", "unit:"))]
    parts = [p for n in names for p in n.replace("/", ".").split(".")]
    return tuple(dict.fromkeys([*(e.keywords or []), *names, *parts, *([e.unit] if e.unit else [])]))


def checklist(items: list[dict[str, Any]], unit: str | None) -> list[dict[str, Any]]:
    """What to verify in the current code, entry by entry: its conditions, then its gaps."""
    where = f" in {unit}" if unit else ""
    out = []
    for item in items:
        checks = [f"check{where}: {c}" for c in item["conditions"]] or [f"check{where} that it applies: {item['text']}"]
        checks += [f"still unverified: {u}" for u in item["unverified"]]
        out.append({"id": item["id"], "status": item["status"], "label": item["label"], "checks": checks})
    return out
