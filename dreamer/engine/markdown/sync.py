"""The Markdown view both ways: a person's edits read back into SQL before each render (as
`human` records, `dreamer.engine.markdown.edits` says what changed), then the files written
from SQL, never over a change a person made meanwhile.

What each file held when it was last rendered is kept in the user's folder (`STATE_FILE`: the
hashes of each file and of each entry's text). A file that differs from it was changed by a
person; a file that changes between the read-back and the write is a conflict: the person's
version is read back and the render done again. Call these under the folder's render lock.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session as DBSession
from sqlmodel import col

from dreamer.core.consolidate import content_hash
from dreamer.core.models import CURRENT_STATUSES, Memory
from dreamer.engine.markdown import render as markdown_render
from dreamer.engine.markdown import views as markdown
from dreamer.engine.markdown.code import code_sections
from dreamer.engine.markdown.edits import Edit, Problem, ReadBack, RenderedState, digest, read_back
from dreamer.engine.markdown.entries import ViewedMemory, parse_entries
from dreamer.engine.runtime import Runtime
from dreamer.store import cabinet
from dreamer.store.by_hand import set_by_hand
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

STATE_FILE = ".view-state.json"
_ATTEMPTS = 3  # renders redone after a person's change landed mid-render, before giving up for now

VIEW_COLUMNS = (  # what the Markdown view reads of a memory
    col(Memory.id),
    col(Memory.user_id),
    col(Memory.agent_id),
    col(Memory.team),
    col(Memory.kind),
    col(Memory.text),
    col(Memory.status),
    col(Memory.evidence),
    col(Memory.importance),
    col(Memory.untrusted),
    col(Memory.project),
    col(Memory.last_seen),
    col(Memory.updated_at),
)


@dataclass
class ViewReport:
    """What one sync of a user's view did: edits applied, unreadable lines, conflicts."""

    user_id: str
    applied: list[Edit] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)  # files a person and a render changed at once
    held: list[str] = field(default_factory=list)  # files left as the person wrote them

    def json(self) -> dict[str, Any]:
        return {
            "user_id": self.user_id,
            "applied": [
                {"event": e.event, "file": e.file, "line": e.line, "memory_id": e.memory_id} for e in self.applied
            ],
            "problems": [str(p) for p in self.problems],
            "conflicts": self.conflicts,
            "held": self.held,
        }


# --- the record of the last render ----------------------------------------------------


def load_state(base: Path) -> dict[str, RenderedState]:
    try:
        raw = json.loads((base / STATE_FILE).read_text(encoding="utf-8"))
        files = raw["files"]
        return {rel: RenderedState(f["sha"], dict(f["entries"]), f.get("project")) for rel, f in files.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def state_owner(base: Path) -> str | None:
    """The user whose view the folder holds, as its last render recorded."""
    try:
        owner = json.loads((base / STATE_FILE).read_text(encoding="utf-8")).get("user_id")
    except (OSError, ValueError, AttributeError):
        return None
    return owner if isinstance(owner, str) else None


def _save_state(base: Path, user_id: str, state: dict[str, RenderedState]) -> None:
    files = {rel: {"sha": s.sha, "entries": dict(s.entries), "project": s.project} for rel, s in sorted(state.items())}
    data = json.dumps({"user_id": user_id, "files": files}, sort_keys=True).encode("utf-8")
    markdown.write_atomic(base / STATE_FILE, data)  # a new temp file is private (0600), and so is the result


def _rendered(content: str, projects: dict[str, str | None]) -> RenderedState:
    entries = {e.memory_id: digest(e.text) for e in parse_entries(content)}
    project = next((projects[i] for i in entries if i in projects), None)
    return RenderedState(digest(content), entries, project)


def view_files(base: Path) -> list[str]:
    """The rendered files of a user's folder (daily notes apart), relative to it."""
    names = [markdown.MEMORY_FILE, markdown.USER_FILE, markdown.DREAMS_FILE, markdown.DREAMS_ARCHIVE_FILE]
    coding = base / markdown.CODING_DIR
    if coding.is_dir():
        names += sorted(f"{markdown.CODING_DIR}/{p.name}" for p in coding.glob("*.md"))
    return names


def read_disk(base: Path, rels: Sequence[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for rel in rels:
        try:
            out[rel] = (base / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            out[rel] = None
    return out


def touched(base: Path) -> bool:
    """Whether a person changed a file of the view since its last render."""
    state = load_state(base)
    disk = read_disk(base, sorted(state))
    return any(c is not None and digest(c) != state[rel].sha for rel, c in disk.items())


# --- edits into SQL -------------------------------------------------------------------


def _current(s: DBSession, user_id: str, memory_id: str | None) -> Memory | None:
    m = s.get(Memory, memory_id) if memory_id else None
    return m if m is not None and m.user_id == user_id and m.status in CURRENT_STATUSES else None


def _add_by_hand(s: DBSession, user_id: str, e: Edit) -> bool:
    if e.text is None or cabinet.known_hashes(s, user_id, [content_hash(e.text)]).current:
        return False
    m = cabinet.add_memory(
        s,
        user_id=user_id,
        kind=e.kind or "profile",
        text=e.text,
        source="human",
        evidence=[],
        project=e.project,
        reason="added by hand",
    )
    m.status = "review_required" if m.untrusted else "verified"  # a steering line waits for a person
    s.add(m)
    return True


def _conflict(s: DBSession, user_id: str, m: Memory, e: Edit) -> bool:
    """One entry edited two ways in one save: the first version becomes the memory's text, every
    other a memory of its own, and the entry waits in review with the change to each held, so
    no version wins in silence."""
    where = {"file": e.file, "line": e.line, "versions": [[e.file, e.line], *[[f, n] for f, n, _ in e.others]]}
    reason = f"edited in {len(e.others) + 1} places in one save"
    set_by_hand(s, m, "edit", status="review_required", reason=reason, text=e.text, vouched=True, where=where)
    for file, line, text in e.others:
        other = cabinet.add_memory(
            s, user_id=user_id, kind=m.kind, text=text, source="human", evidence=[], project=m.project, reason=reason
        )
        cabinet.hold(s, m, other.id, run_id=None, reason=f"{reason}: {file}:{line} says otherwise")
    return True


def _apply_one(s: DBSession, user_id: str, e: Edit) -> bool:
    if e.event == "add":
        return _add_by_hand(s, user_id, e)
    where = {"file": e.file, "line": e.line}
    found = _current(s, user_id, e.memory_id)
    if found is None:
        return False
    m = found
    if e.event == "forget":
        cabinet.forget(s, m.id, reason=f"removed from {e.file}", user_id=user_id)
        return True
    if e.event == "conflict":
        return _conflict(s, user_id, m, e)
    if m.status == "verified" and m.source == "human" and (e.event != "edit" or e.text == m.text):
        return False  # read back already (a render redone after a person's change mid-render)
    text = e.text if e.event == "edit" else None
    set_by_hand(s, m, e.event, status="verified", reason=f"{e.event} in {e.file}", text=text, vouched=True, where=where)
    m.last_seen = m.updated_at
    return True


def apply_edits(engine: Engine, user_id: str, edits: Sequence[Edit]) -> list[Edit]:
    """Apply a person's edits in one transaction; those that changed something."""
    with session_scope(engine) as s:
        return [e for e in edits if _apply_one(s, user_id, e)]


# --- render -------------------------------------------------------------------------


def _memories(engine: Engine, user_id: str) -> list[ViewedMemory]:
    with engine.connect() as conn:
        return list(conn.execute(cabinet.current_query(user_id, *VIEW_COLUMNS)).all())


def _read(
    rt: Runtime, user_id: str, base: Path, state: dict[str, RenderedState]
) -> tuple[ReadBack, dict[str, str | None]]:
    rels = sorted(set(state) | set(view_files(base)))
    with rt.engine.connect() as conn:
        known = {r[0] for r in conn.execute(cabinet.current_query(user_id, col(Memory.id))).all()}
    known |= {i for st in state.values() for i in st.entries}
    disk = read_disk(base, rels)
    return read_back(disk, state, known), disk


def render_view(
    rt: Runtime, user_id: str, *, due: bool = False, index: Callable[[], object] | None = None, quiet: bool = False
) -> ViewReport:
    """Read a person's edits back, then write the user's view from SQL (under the render lock).

    `due`: SQL changed since the last render, so a file a person changed is also one the render
    changes (a conflict, reported; the person's version was read back first). `index`: called
    after edits were applied, to bring the index up to date. `quiet`: the caller tells the
    problems and conflicts itself (else they are logged)."""
    base = markdown.user_dir(rt.settings.workspace_dir, user_id)
    report = ViewReport(user_id)
    for _ in range(_ATTEMPTS):
        state = load_state(base)
        rb, disk = _read(rt, user_id, base, state)
        report.applied += apply_edits(rt.engine, user_id, rb.edits)
        report.problems, report.held = rb.problems, rb.held
        if due:
            report.conflicts += [r for r in rb.changed if r not in rb.held and r not in report.conflicts]
        if report.applied and index is not None:
            index()
        if _write(rt, user_id, base, state, rb, disk):
            break
        due = True  # a person's change landed while rendering: read it back and render again
    if quiet:
        return report
    for p in report.problems:
        log.warning("view of %s: %s (file left as written)", user_id, p)
    for rel in report.conflicts:
        log.warning("view of %s: %s changed by a person and by a render; the person's version was kept", user_id, rel)
    return report


def _write(
    rt: Runtime, user_id: str, base: Path, state: dict[str, RenderedState], rb: ReadBack, disk: dict[str, str | None]
) -> bool:
    """Write every file but the held ones; False (nothing written) if one changed since it was read."""
    memories = _memories(rt.engine, user_id)
    files = markdown_render.render_user(
        rt.settings.workspace_dir,
        user_id,
        memories,
        dreams_cap=rt.settings.dreams_cap,
        code_work=code_sections(rt.engine, user_id),
    )
    files = [f for f in files if f.path.relative_to(base).as_posix() not in rb.held]
    rels = [f.path.relative_to(base).as_posix() for f in files]
    if read_disk(base, rels) != {rel: disk.get(rel) for rel in rels}:
        return False
    markdown.write_files(files)
    projects = {m.id: m.project for m in memories}
    new_state = {r: st for r, st in state.items() if r in rb.held}
    new_state.update({rel: _rendered(f.content, projects) for rel, f in zip(rels, files)})
    _save_state(base, user_id, new_state)
    return True
