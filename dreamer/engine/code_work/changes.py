"""Changes that send states and entries back to review: a change named by the caller
(`file:`, `interface:`, `unit:`, `version:`), and what `project check` finds in a workspace
(file content hashes always, the git HEAD when it is a repository)."""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session as DBSession

from dreamer.core.code_work import experience as life
from dreamer.core.code_work.project_state import HASH_PREFIX, Stale, evidence_files, stale_evidence
from dreamer.core.code_work.propagate import Node, Reached, dependents
from dreamer.core.errors import ConfigError
from dreamer.core.models import ExperienceEntry, ProjectState
from dreamer.engine.code_work.book import CodeBook, apply_outcome, lifecycle
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where


@dataclass(frozen=True)
class Demoted:
    """A state or entry a change sent to review, and why."""

    subject: str  # state | entry
    id: str
    label: str  # unit.field of a state, the text of an entry
    reason: str

    def json(self) -> dict[str, str]:
        return {"subject": self.subject, "id": self.id, "label": self.label, "reason": self.reason}


def nodes(states: list[ProjectState], entries: list[ExperienceEntry]) -> list[Node]:
    return [Node(st.id, "state", st.unit, tuple(st.depends_on)) for st in states] + [
        Node(e.id, "entry", e.unit, tuple(e.depends_on), tuple(e.versions)) for e in entries
    ]


def _demote(s: DBSession, by_id: dict[str, Any], reached: Reached, data: dict[str, Any]) -> Demoted:
    row = by_id[reached.key]
    before = row.status
    if isinstance(row, ExperienceEntry):
        apply_outcome(row, life.demoted(lifecycle(row), reached.reason))
        label = row.text
    else:
        row.status, row.reason = "review_required", reached.reason
        label = f"{row.unit}.{row.field}"
    rows.record(s, row, "demote", before, reached.reason, {**data, "depth": reached.depth})
    return Demoted("state" if isinstance(row, ProjectState) else "entry", row.id, label, reached.reason)


def propagate(
    s: DBSession,
    where: Where,
    target: str,
    depth: int,
    data: dict[str, Any],
    *,
    reason: str | None = None,
    skip: set[str] | None = None,
) -> list[Demoted]:
    """Send whatever the change of `target` reaches to review, in this transaction (but the ids
    in `skip`, which are already there)."""
    states, entries = list(rows.states(s, where)), list(rows.entries(s, where))
    by_id: dict[str, Any] = {st.id: st for st in states} | {e.id: e for e in entries}
    reached = dependents(target, nodes(states, entries), depth, reason)
    return [_demote(s, by_id, r, data) for r in reached if r.key not in (skip or set())]


def change(book: CodeBook, where: Where, target: str, value: str | None = None) -> list[Demoted]:
    """Record that `target` changed (to `value`, for a version) and demote its dependents."""
    life.parse_target(target)
    reason = f"{target} changed to {value}" if value else f"{target} changed"
    with session_scope(book.engine) as s:
        return propagate(s, where, target, book.depth, {"target": target, "value": value}, reason=reason)


def file_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            digest.update(block)
    return HASH_PREFIX + digest.hexdigest()


def git_head(root: Path) -> str | None:
    """The commit `root` is at, or None when it is not a git repository (or git is missing)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def current_hashes(root: Path, paths: set[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in sorted(paths):
        f = (root / p).resolve()
        out[p] = file_hash(f) if f.is_file() and f.is_relative_to(root.resolve()) else None
    return out


def with_hashes(evidence: dict[str, Any], depends_on: list[str], root: Path) -> dict[str, Any]:
    """`evidence` with the content hash, as the workspace has it now, of each file it names
    without one and of each `file:` it depends on, and the commit when it names none."""
    if not root.is_dir():
        raise ConfigError(f"workspace {root} is not a folder")
    given = evidence.get("files")
    files: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    named = {str(p) for p, h in files.items() if not h} | {t[5:] for t in depends_on if t.startswith("file:")}
    current = current_hashes(root, named)
    if missing := sorted(p for p, h in current.items() if h is None):
        raise ConfigError(f"no file {missing[0]} in the workspace {root}")
    out = {**evidence, "files": {**files, **current}}
    head = git_head(root)
    if head and not out.get("commit"):
        out["commit"] = head
    return out


def check_workspace(book: CodeBook, where: Where, root: Path) -> dict[str, Any]:
    """Compare the workspace with each state's evidence; demote what no longer holds, and what
    depends on it. An unchanged workspace changes nothing."""
    if not root.is_dir():
        raise ConfigError(f"workspace {root} is not a folder")
    head = git_head(root)
    with session_scope(book.engine) as s:
        states = list(rows.states(s, where))
        paths = {p for st in states for p in evidence_files(st.evidence)}
        current = current_hashes(root, paths)
        demoted: list[Demoted] = []
        done: set[str] = set()
        for st in states:
            for stale in stale_evidence(st.evidence, current, head):
                if stale.target not in done and st.status != "review_required":
                    done.add(stale.target)
                    demoted.extend(_stale(s, where, st, stale, book.depth))
    return {"head": head, "files_checked": len(paths), "demoted": [d.json() for d in demoted]}


def _stale(s: DBSession, where: Where, st: ProjectState, stale: Stale, depth: int) -> list[Demoted]:
    """Demote the states whose evidence `stale` contradicts and whatever depends on what changed;
    what is already under review stays as it is."""
    data = {"target": stale.target, "check": "workspace"}
    held = [(r.id, r.status) for r in rows.states(s, where)] + [(e.id, e.status) for e in rows.entries(s, where)]
    skip = {key for key, status in held if status == "review_required"}
    out: list[Demoted] = []
    if stale.target.startswith("file:"):
        out = propagate(s, where, stale.target, depth, data, reason=stale.reason, skip=skip)
        path = stale.target.removeprefix("file:")
        holders = [o for o in rows.states(s, where) if path in evidence_files(o.evidence)]
    else:
        holders = [st]
    for o in holders:
        if o.id in skip or o.id in {d.id for d in out}:
            continue
        out.append(_demote(s, {o.id: o}, Reached(o.id, "state", 0, stale.reason), data))
        done = skip | {d.id for d in out}
        out.extend(propagate(s, where, f"unit:{o.unit}", depth, data, reason=stale.reason, skip=done))
    return out
