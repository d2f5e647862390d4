"""The review queue as the HTTP API and the MCP tools serve it: one caller's pending memories and
held replacements, and a person's word on one of them (the index and the Markdown follow)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import Depends, FastAPI
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from dreamer.core.scope import Scope
from dreamer.engine import outbox
from dreamer.engine.records import review
from dreamer.engine.runtime import Runtime
from dreamer.ingest.base import MAX_FIELD_CHARS
from dreamer.online.auth import Auth, Grant

Answer = dict[str, Any]
Decision = Literal["accept", "reject"]


class ReviewIn(BaseModel):
    """A person's word on a queued memory; `text` (accept only): the memory in their words."""

    model_config = ConfigDict(extra="forbid")

    decision: Decision
    text: str | None = Field(None, min_length=1, max_length=4000)


def queued(rt: Runtime, scope: Scope, limit: int = 200) -> Answer:
    """What waits for the scope's user: {"items": [{memory_id, text, status, replaces, ...}]}."""
    return {"items": [i.json() for i in review.queue(rt.engine, user_id=scope.user_id, limit=limit)]}


def decide(rt: Runtime, scope: Scope, memory_id: str, body: ReviewIn) -> Answer:
    """Accept (optionally in other words) or reject one of the scope user's queued memories."""
    if body.decision == "accept":
        done = review.accept(rt.engine, memory_id, user_id=scope.user_id, text=body.text)
    else:
        done = review.reject(rt.engine, memory_id, user_id=scope.user_id)
    outbox.drain(rt, users=[scope.user_id])  # indexes the change and renders the user's view
    return done.json()


def review_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """GET /v1/review (the queue) and POST /v1/review/{memory_id} (a writer's decision)."""

    @app.get("/v1/review", tags=["review"])
    def review_queue(g: Grant = Depends(auth.grant)) -> Answer:
        """The token user's memories waiting for review, oldest first."""
        return queued(rt, g.scope)

    @app.post("/v1/review/{memory_id}", tags=["review"])
    def review_decide(
        body: ReviewIn,
        memory_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS),
        g: Grant = Depends(auth.writer),
    ) -> Answer:
        """Accept or reject a queued memory; 404 if it is not the token user's, 409 if not queued."""
        return decide(rt, g.scope, memory_id, body)
