"""Memory for code work as the HTTP API and the MCP tools serve it: the request shapes and the one
body of each call, in the caller's user scope (the project and branch are named by the call)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dreamer.core.code_work.experience import ENTRY_STATUSES
from dreamer.core.settings import MAX_RECALL_K
from dreamer.engine.code_work.book import CodeBook, EntryInput, StateInput
from dreamer.engine.code_work.changes import change
from dreamer.engine.code_work.search import entry_json, search
from dreamer.engine.code_work.tasks import task_end
from dreamer.engine.outbox import render_now
from dreamer.engine.runtime import Runtime
from dreamer.store import experience as rows
from dreamer.store.db import session_scope
from dreamer.store.experience import Where

Answer = dict[str, Any]
MAX_NAME = 255


class InProject(BaseModel):
    model_config = ConfigDict(extra="forbid")

    project: str = Field(min_length=1, max_length=MAX_NAME, description="The project (the repository's name).")
    branch: str = Field("main", min_length=1, max_length=MAX_NAME, description="The branch; default main.")


class StateIn(InProject):
    unit: str = Field(min_length=1, max_length=MAX_NAME, description="The unit of work (a component, a module).")
    field: str = Field(min_length=1, max_length=MAX_NAME, description="The field, dotted: checks.typecheck.")
    value: Any = Field(None, description="The field's value (any JSON).")
    status: str = Field("in_progress", description="in_progress | verified | review_required.")
    evidence: dict[str, Any] = Field(default_factory=dict, description='{"command", "result", "commit", "files"}')
    depends_on: list[str] = Field(default_factory=list, description="file:PATH, interface:NAME, unit:NAME, version:LIB")
    by: str | None = Field(None, max_length=MAX_NAME, description="A person who vouches for it.")


class SearchIn(InProject):
    query: str = Field(min_length=1, max_length=4000, description="What the task is about.")
    unit: str | None = Field(None, max_length=MAX_NAME, description="The unit at hand: context, never a filter.")
    versions: dict[str, str] = Field(default_factory=dict, description="Library versions in use {lib: version}.")
    statuses: list[str] = Field(default_factory=lambda: list(ENTRY_STATUSES), description="Statuses to return.")
    k: int | None = Field(None, ge=1, le=MAX_RECALL_K, description="At most this many entries.")


class EntryIn(InProject):
    text: str = Field(min_length=1, max_length=20_000, description="The lesson.")
    unit: str | None = Field(None, max_length=MAX_NAME)
    task: str | None = Field(None, max_length=MAX_NAME)
    basis: str = Field("inferred", description="observed | inferred | confirmed")
    origin: str = Field("agent", description="agent | tool | repository | person")
    conditions: list[str] = Field(default_factory=list)
    unverified: list[str] = Field(default_factory=list)
    versions: dict[str, str] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class ChangeIn(InProject):
    target: str = Field(min_length=3, max_length=4000, description="file:PATH, interface:NAME, unit:NAME, version:LIB")
    value: str | None = Field(None, max_length=MAX_NAME, description="The new version, for version:LIB.")


class TaskEndIn(InProject):
    task: str = Field(min_length=1, max_length=MAX_NAME)
    unit: str | None = Field(None, max_length=MAX_NAME)
    findings: list[dict[str, Any]] = Field(default_factory=list, description="[{text, conditions?, basis?, ...}]")
    failed_calls: list[dict[str, Any]] = Field(default_factory=list, description="[{tool, error, command?, lesson?}]")


def book(rt: Runtime) -> CodeBook:
    return CodeBook(rt.engine, depth=rt.settings.experience_propagation_depth)


def _where(user_id: str, body: InProject) -> Where:
    return Where(user_id, body.project, body.branch)


def _rendered(rt: Runtime, user_id: str, answer: Answer) -> Answer:
    render_now(rt, user_id)
    return answer


def state_rows(rt: Runtime, user_id: str, body: InProject, unit: str | None = None) -> Answer:
    with session_scope(rt.engine) as s:
        found = [r.model_dump(mode="json") for r in rows.states(s, _where(user_id, body), unit)]
    return {"project": body.project, "branch": body.branch, "states": found}


def set_state(rt: Runtime, user_id: str, body: StateIn) -> Answer:
    given = StateInput(body.unit, body.field, body.value, body.status, body.evidence, body.depends_on, body.by)
    row = book(rt).set_state(_where(user_id, body), given)
    return _rendered(rt, user_id, row.model_dump(mode="json"))


def find(rt: Runtime, user_id: str, body: SearchIn) -> Answer:
    k = body.k or rt.settings.experience_search_k
    return search(
        book(rt),
        _where(user_id, body),
        body.query,
        unit=body.unit,
        versions=body.versions,
        statuses=body.statuses,
        limit=k,
        embedder=rt.embedder,
    )


def add_entry(rt: Runtime, user_id: str, body: EntryIn) -> Answer:
    fields = body.model_dump(exclude={"project", "branch"})
    e = book(rt).add_entry(_where(user_id, body), EntryInput(**fields))
    return _rendered(rt, user_id, entry_json(e, 0, ()))


def changed(rt: Runtime, user_id: str, body: ChangeIn) -> Answer:
    demoted = change(book(rt), _where(user_id, body), body.target, body.value)
    return _rendered(rt, user_id, {"target": body.target, "demoted": [d.json() for d in demoted]})


def verify(rt: Runtime, user_id: str, entry_id: str, unit: str, result: str, task: str | None) -> Answer:
    e = book(rt).verify(user_id, entry_id, unit, result, task)
    return _rendered(rt, user_id, entry_json(e, 0, ()))


def counterexample(rt: Runtime, user_id: str, entry_id: str, text: str, unit: str | None) -> Answer:
    e = book(rt).counterexample(user_id, entry_id, text, unit)
    return _rendered(rt, user_id, entry_json(e, 0, ()))


def confirm(rt: Runtime, user_id: str, entry_id: str, by: str) -> Answer:
    row = book(rt).confirm(user_id, entry_id, by)
    return _rendered(rt, user_id, row.model_dump(mode="json"))


def ended(rt: Runtime, user_id: str, body: TaskEndIn) -> Answer:
    added = task_end(
        book(rt),
        _where(user_id, body),
        body.task,
        unit=body.unit,
        findings=body.findings,
        failed_calls=body.failed_calls,
    )
    return _rendered(rt, user_id, {"entries": [entry_json(e, 0, ()) for e in added]})
