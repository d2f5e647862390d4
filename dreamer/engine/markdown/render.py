"""The content of one user's Markdown view: which current memories go in which file, grouped
by kind and ranked (the layout is `dreamer.engine.markdown.views`'s)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from dreamer.core.models import AGENT_KINDS, CODE_KINDS, CURRENT_STATUSES, KINDS, TEAM_KINDS
from dreamer.engine.markdown.entries import ViewedMemory, entry_line, escape_text, session_count
from dreamer.engine.markdown.views import (
    CODING_DIR,
    DREAMS_ARCHIVE_FILE,
    DREAMS_FILE,
    MEMORY_FILE,
    TEAMS_DIR,
    UNSCOPED_PROJECT_FILE,
    USER_FILE,
    RenderedFile,
    safe_name,
    user_dir,
)

log = logging.getLogger(__name__)

NOTE = (
    "_Each entry carries its memory id in a trailing comment; keep the comment when you edit "
    "a line, so the entry can still be matched to its record._"
)
EMPTY = "_No entries._"

KIND_TITLES = {
    "preference": "Preferences",
    "profile": "Profile",
    "focus": "Focus",
    "root_cause": "Root causes",
    "interface_behavior": "Interface behavior",
    "design_decision": "Design decisions",
    "daily_note": "Daily notes",
    "decision": "Decisions",
    "lesson": "Lessons",
    "expertise": "Expertise",
    "context": "Context",
}

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# --- ranking --------------------------------------------------------------------------


def _ts(value: datetime | None) -> float:
    if value is None:
        return 0.0
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH).total_seconds()


def rank_key(memory: ViewedMemory) -> tuple[int, int, float, float, str]:
    """Verified first, then more evidence sessions, importance, recency; id breaks ties."""
    recency = max(_ts(memory.last_seen), _ts(memory.updated_at))
    return (
        0 if memory.status == "verified" else 1,
        -session_count(memory),
        -float(memory.importance or 0.0),
        -recency,
        memory.id,
    )


def ranked(memories: Iterable[ViewedMemory]) -> list[ViewedMemory]:
    return sorted(memories, key=rank_key)


# --- rendering ------------------------------------------------------------------------


def _heading_text(s: str) -> str:
    return escape_text(s) or "(unnamed)"


def _document(title: str, sections: Sequence[tuple[str | None, Sequence[ViewedMemory]]]) -> str:
    """A file: title, note, then each section (optional ``##`` heading and bullets)."""
    lines = [f"# {title}", "", NOTE, ""]
    sections = [(h, ms) for h, ms in sections if ms]
    if not sections:
        lines += [EMPTY, ""]
    for heading, memories in sections:
        if heading:
            lines += [f"## {heading}", ""]
        lines += [entry_line(m) for m in memories]
        lines.append("")
    return "\n".join(lines)


def _kind_order(kind: str) -> tuple[int, str]:
    return (KINDS.index(kind), kind) if kind in KINDS else (len(KINDS), kind)


def _by_kind(memories: Iterable[ViewedMemory]) -> list[tuple[str | None, list[ViewedMemory]]]:
    groups: dict[str, list[ViewedMemory]] = {}
    for m in memories:
        groups.setdefault(m.kind, []).append(m)
    return [(KIND_TITLES.get(k, k), ranked(groups[k])) for k in sorted(groups, key=_kind_order)]


def _current(user_id: str, memories: Iterable[ViewedMemory]) -> list[ViewedMemory]:
    out = []
    for m in memories:
        if m.user_id != user_id:
            log.warning("memory %s belongs to another user; not rendered", m.id)
            continue
        if m.status in CURRENT_STATUSES:
            out.append(m)
    return out


def _coding_files(base: Path, current: list[ViewedMemory], code_work: Mapping[str, str]) -> list[RenderedFile]:
    """A file per project: its code-mode memories, then its state and experience (`code_work`)."""
    projects: dict[str | None, list[ViewedMemory]] = {p: [] for p in code_work}
    for m in current:
        if m.kind in CODE_KINDS:
            projects.setdefault(m.project or None, []).append(m)
    files: dict[Path, RenderedFile] = {}
    for project, memories in projects.items():
        if project is None:
            path, title = base / CODING_DIR / UNSCOPED_PROJECT_FILE, "Coding: (no project)"
        else:
            path, title = base / CODING_DIR / f"{safe_name(project)}.md", f"Coding: {_heading_text(project)}"
        text = _document(title, _by_kind(memories)) if memories or project not in code_work else f"# {title}\n\n"
        files[path] = RenderedFile(path, text + (code_work.get(project, "") if project else ""))
    files.update(_stale_coding_files(base, files))
    return [files[p] for p in sorted(files)]


def _stale_coding_files(base: Path, fresh: dict[Path, RenderedFile]) -> dict[Path, RenderedFile]:
    """Project files on disk with no current memories left: rewritten empty, never left stale."""
    folder = base / CODING_DIR
    if not folder.is_dir():
        return {}
    out: dict[Path, RenderedFile] = {}
    for path in folder.glob("*.md"):
        if path in fresh or not path.is_file():
            continue
        title = "Coding"
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                first = fh.readline().rstrip("\n")
            if first.startswith("# Coding"):
                title = first[2:]
        except OSError as exc:
            log.warning("cannot read %s: %s", path, exc)
        out[path] = RenderedFile(path, _document(title, []))
    return out


def team_of(m: ViewedMemory) -> str | None:
    """The team whose memory `m` is (owned by exactly the team's scope: no agent, no project), or None."""
    team = getattr(m, "team", None)
    own = getattr(m, "agent_id", None) is None and m.project is None and m.kind in TEAM_KINDS
    return team if own and isinstance(team, str) else None


def _team_files(base: Path, current: list[ViewedMemory]) -> list[RenderedFile]:
    """One file per team of the user: its memory under the four tags."""
    teams: dict[str, list[ViewedMemory]] = {}
    for m in current:
        if (team := team_of(m)) is not None:
            teams.setdefault(team, []).append(m)
    return [
        RenderedFile(base / TEAMS_DIR / f"{safe_name(t)}.md", _document(f"Team: {_heading_text(t)}", _by_kind(ms)))
        for t, ms in sorted(teams.items())
    ]


def render_user(
    workspace: Path,
    user_id: str,
    memories: Sequence[ViewedMemory],
    *,
    dreams_cap: int = 50,
    code_work: Mapping[str, str] | None = None,
) -> list[RenderedFile]:
    """Every file of one user's view, from that user's memories (only current ones are shown)."""
    base = user_dir(workspace, user_id)
    current = _current(user_id, memories)

    verified = [m for m in current if m.status == "verified" and m.kind != "daily_note"]
    profile = [m for m in current if m.kind == "profile" and not m.untrusted]  # USER.md may be injected
    prefs = [m for m in current if m.kind == "preference" and m.status == "verified"]
    agent = ranked(m for m in current if m.kind in AGENT_KINDS)
    cap = max(0, dreams_cap)
    dreams, archive = agent[:cap], agent[cap:]

    user_sections = [(KIND_TITLES["profile"], ranked(profile)), (KIND_TITLES["preference"], ranked(prefs))]
    files = [
        RenderedFile(base / MEMORY_FILE, _document("Memory", _by_kind(verified))),
        RenderedFile(base / USER_FILE, _document("User", user_sections)),
        RenderedFile(base / DREAMS_FILE, _document("Dreams", [(None, dreams)])),
    ]
    archive_path = base / DREAMS_ARCHIVE_FILE
    if archive or archive_path.exists():
        files.append(RenderedFile(archive_path, _document("Dreams archive", [(None, archive)])))
    files += _coding_files(base, current, code_work or {})
    files += _team_files(base, current)
    log.debug("rendered %d files for %s (%d current memories)", len(files), base.name, len(current))
    return files
