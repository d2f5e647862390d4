"""The code-work part of `coding/<project>.md`: each unit's state with status and evidence, then
the experience entries with status, conditions and counterexamples (one block per branch)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy.engine import Engine

from dreamer.core.models import ExperienceEntry, ProjectState
from dreamer.engine.markdown.entries import escape_text
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where


def _state_lines(states: Sequence[ProjectState]) -> list[str]:
    lines = []
    for st in states:
        value = escape_text(json.dumps(st.value, ensure_ascii=False))
        lines.append(f"- **{escape_text(st.unit)}** `{escape_text(st.field)}` = {value} [{st.status}] <!-- {st.id} -->")
        lines.append(f"  - why: {escape_text(st.reason or '')}")
        lines.append(f"  - evidence: {escape_text(json.dumps(st.evidence, ensure_ascii=False, sort_keys=True))}")
        if st.depends_on:
            lines.append(f"  - depends on: {escape_text(', '.join(st.depends_on))}")
    return lines


def _entry_lines(entries: Sequence[ExperienceEntry]) -> list[str]:
    lines = []
    for e in entries:
        lines.append(f"- [{e.status}, {e.basis}] {escape_text(e.text)} <!-- {e.id} -->")
        lines.append(f"  - why: {escape_text(e.reason or '')}")
        for label, items in (
            ("condition", e.conditions),
            ("counterexample", e.counterexamples),
            ("unverified", e.unverified),
        ):
            lines += [f"  - {label}: {escape_text(str(item))}" for item in items]
        if e.verified_units:
            lines.append(f"  - verified in: {escape_text(', '.join(e.verified_units))}")
        if e.versions:
            lines.append(f"  - versions: {escape_text(json.dumps(e.versions, sort_keys=True))}")
        if e.note:
            lines.append(f"  - note: {escape_text(e.note)}")
    return lines


def section(branch: str, states: Sequence[ProjectState], entries: Sequence[ExperienceEntry]) -> str:
    lines = [f"## Project state ({escape_text(branch)})", ""]
    lines += _state_lines(states) or ["_No entries._"]
    lines += ["", f"## Experience ({escape_text(branch)})", ""]
    lines += _entry_lines(entries) or ["_No entries._"]
    return "\n".join(lines) + "\n\n"


def code_sections(engine: Engine, user_id: str) -> dict[str, str]:
    """{project: its Markdown part} for every project the user has code work in."""
    out: dict[str, str] = {}
    with session_scope(engine) as s:
        for project, branch in rows.projects(s, user_id):
            where = Where(user_id, project, branch)
            out[project] = out.get(project, "") + section(branch, rows.states(s, where), rows.entries(s, where))
    return out
