"""The HTTP routes of memory for code work: project state, experience (task start and task end),
and changes that send what depends on them to review. Each acts in its token's user scope."""

from __future__ import annotations

from fastapi import Depends, FastAPI, Query
from pydantic import BaseModel, Field

from dreamer.engine.runtime import Runtime
from dreamer.online.auth import Auth, Grant
from dreamer.online.code_work import calls as work

Answer = work.Answer


class VerifyIn(BaseModel):
    unit: str = Field(min_length=1, max_length=work.MAX_NAME, description="The unit it was checked in.")
    result: str = Field("passed", max_length=32, description="passed | failed")
    task: str | None = Field(None, max_length=work.MAX_NAME)


class CounterexampleIn(BaseModel):
    text: str = Field(min_length=1, max_length=20_000)
    unit: str | None = Field(None, max_length=work.MAX_NAME)


class ConfirmIn(BaseModel):
    by: str = Field(min_length=1, max_length=work.MAX_NAME, description="The person who confirms it.")


def code_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """Project state and experience under /v1/projects and /v1/experience."""
    _project_routes(app, rt, auth)
    _experience_routes(app, rt, auth)


def _project_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:

    @app.get("/v1/projects/{project}/state", tags=["code"])
    def project_state(
        project: str,
        branch: str = Query("main", min_length=1, max_length=work.MAX_NAME),
        unit: str | None = Query(None, max_length=work.MAX_NAME),
        g: Grant = Depends(auth.grant),
    ) -> Answer:
        """Each unit's state: field, value, status, why, evidence, and what it depends on."""
        return work.state_rows(rt, g.user_id, work.InProject(project=project, branch=branch), unit)

    @app.put("/v1/projects/state", tags=["code"])
    def set_project_state(body: work.StateIn, g: Grant = Depends(auth.writer)) -> Answer:
        """Set one field; `verified` holds only with a passed check or a person."""
        return work.set_state(rt, g.user_id, body)

    @app.post("/v1/projects/changes", tags=["code"])
    def project_change(body: work.ChangeIn, g: Grant = Depends(auth.writer)) -> Answer:
        """Something changed: whatever depends on it goes to review, with the reason."""
        return work.changed(rt, g.user_id, body)


def _experience_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:

    @app.post("/v1/experience/search", tags=["code"])
    def experience_search(body: work.SearchIn, g: Grant = Depends(auth.grant)) -> Answer:
        """Task start: the entries worth checking, with status, evidence and a checklist."""
        return work.find(rt, g.user_id, body)

    @app.post("/v1/experience", tags=["code"])
    def experience_add(body: work.EntryIn, g: Grant = Depends(auth.writer)) -> Answer:
        """Record a lesson as a candidate."""
        return work.add_entry(rt, g.user_id, body)

    @app.post("/v1/experience/task-end", tags=["code"])
    def experience_task_end(body: work.TaskEndIn, g: Grant = Depends(auth.writer)) -> Answer:
        """Task end: findings and failed tool calls become candidates."""
        return work.ended(rt, g.user_id, body)

    @app.post("/v1/experience/{entry_id}/verify", tags=["code"])
    def experience_verify(entry_id: str, body: VerifyIn, g: Grant = Depends(auth.writer)) -> Answer:
        """A check of the entry in a unit: two distinct units make it verified."""
        return work.verify(rt, g.user_id, entry_id, body.unit, body.result, body.task)

    @app.post("/v1/experience/{entry_id}/counterexample", tags=["code"])
    def experience_counterexample(entry_id: str, body: CounterexampleIn, g: Grant = Depends(auth.writer)) -> Answer:
        """A case where it did not hold: a verified entry goes to review, a candidate narrows."""
        return work.counterexample(rt, g.user_id, entry_id, body.text, body.unit)

    @app.post("/v1/experience/{entry_id}/confirm", tags=["code"])
    def experience_confirm(entry_id: str, body: ConfirmIn, g: Grant = Depends(auth.writer)) -> Answer:
        """A person vouches for an entry or a state field."""
        return work.confirm(rt, g.user_id, entry_id, body.by)
