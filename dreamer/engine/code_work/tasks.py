"""The task-end entry point: what a task found and the tool calls that failed become candidate
experience entries (a failed call is often the most useful lesson). Nothing becomes verified
here: one task is one unit's word."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dreamer.core.code_work.experience import InvalidExperience
from dreamer.core.code_work.experience_rank import identifiers
from dreamer.core.models import ExperienceEntry
from dreamer.engine.code_work.book import CodeBook, EntryInput
from dreamer.store.experience import Where

FINDING_KEYS = (
    "text",
    "basis",
    "origin",
    "conditions",
    "counterexamples",
    "unverified",
    "versions",
    "depends_on",
    "keywords",
    "evidence",
)


def _finding(given: Mapping[str, Any], task: str, unit: str | None) -> EntryInput:
    if not isinstance(given, Mapping) or not isinstance(given.get("text"), str):
        raise InvalidExperience("a finding is an object with a text")
    fields = {k: given[k] for k in FINDING_KEYS if given.get(k) is not None}
    return EntryInput(unit=given.get("unit") or unit, task=task, **fields)


def _failed_call(call: Mapping[str, Any], task: str, unit: str | None) -> EntryInput:
    """`{"tool", "error", "command"?, "lesson"?, "conditions"?}` as an observed candidate."""
    if not isinstance(call, Mapping) or not call.get("tool") or not call.get("error"):
        raise InvalidExperience("a failed tool call names its tool and its error")
    tool, error = str(call["tool"]), str(call["error"]).strip()
    command = f" `{call['command']}`" if call.get("command") else ""
    lesson = str(call.get("lesson") or "check for this before running it again")
    text = f"{tool}{command} failed with: {error}. {lesson}"
    return EntryInput(
        text=text,
        unit=call.get("unit") or unit,
        task=task,
        basis="observed",
        origin="tool",
        conditions=[str(c) for c in call.get("conditions") or []],
        keywords=sorted(identifiers(error)),
        evidence=[{"tool": tool, "command": call.get("command"), "error": error}],
        depends_on=[str(t) for t in call.get("depends_on") or []],
    )


def task_end(
    book: CodeBook,
    where: Where,
    task: str,
    *,
    unit: str | None = None,
    findings: Sequence[Mapping[str, Any]] = (),
    failed_calls: Sequence[Mapping[str, Any]] = (),
) -> list[ExperienceEntry]:
    """Record a task's findings and failed tool calls as candidates; all are checked first, so
    a bad one writes nothing."""
    if not task.strip():
        raise InvalidExperience("task-end names the task")
    given = [_finding(f, task, unit) for f in findings] + [_failed_call(c, task, unit) for c in failed_calls]
    return [book.add_entry(where, g) for g in given]
