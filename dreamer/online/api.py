"""The HTTP API of the online companion (FastAPI): append with the context meter, recall,
context, agent writes, flush, status, health and Prometheus metrics; the MCP server over
streamable HTTP at `/mcp` (`dreamer.online.mcp.server`).

Every call acts in the scope of its bearer token (user, and agent and team when the token
names them), never in one named by the body; a reader token cannot write. Writes under
``/v1/`` mark the token's scope busy for the dreamer while they run; reads do only when the
agent declares them in flight (`dreamer.online.middleware`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi import Path as PathParam
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import func, text
from sqlmodel import Session as DBSession
from sqlmodel import col, select
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route

from dreamer.core.errors import ConfigError
from dreamer.core.models import DailyNote, DreamRun, Memory, Message, Session
from dreamer.core.scope import Scope
from dreamer.core.settings import MAX_CONTEXT_BUDGET, Settings
from dreamer.engine.runtime import Runtime
from dreamer.ingest.base import MAX_FIELD_CHARS, clean_text, identifier_problem
from dreamer.online.agent_writes import forget_memory, remember
from dreamer.online.auth import Auth, Grant, parse_tokens
from dreamer.online.code_work.routes import code_routes
from dreamer.online.compaction.compact import compact_context, restore_offloaded
from dreamer.online.error_responses import add_error_handlers
from dreamer.online.flush.notes import FlushResult, flush_session
from dreamer.online.flush.runner import FlushRunner
from dreamer.online.flush.trigger import flush_point, validate_flush_settings
from dreamer.online.inspector.pages import mount_ui
from dreamer.online.mcp.server import MCP_PATH, HttpEndpoint
from dreamer.online.metrics import Metrics
from dreamer.online.middleware import BodyLimit, Observe
from dreamer.online.modes import modal_context, modal_recall, modal_write, modes_status, said_turns
from dreamer.online.request_checks import OneAuthorization, utf8_ids
from dreamer.online.review_calls import review_routes
from dreamer.online.schemas import AppendIn, CompactIn, MemoryIn, ProjectRecallIn, memory_json, written_json
from dreamer.online.session_append import append, own_session_id
from dreamer.online.team_routes import team_routes
from dreamer.store.busy import CoalescedBusy
from dreamer.store.db import session_scope

Answer = dict[str, Any]  # a JSON answer


def create_app(rt: Runtime, *, insecure_user: str | None = None) -> FastAPI:
    """The API over a runtime; refuses to build without tokens unless `insecure_user` is given."""
    validate_flush_settings(rt.settings)
    grants = parse_tokens(rt.settings.api_tokens)
    if not grants and not insecure_user:
        raise ConfigError(
            "no API tokens configured (DREAMER_API_TOKENS) and no insecure single user: refusing to serve"
        )
    auth = Auth(grants, insecure_user)
    metrics = Metrics(rt)
    runner = FlushRunner(rt, workers=rt.settings.flush_workers, on_done=metrics.flushed)

    mcp = HttpEndpoint(rt, auth, runner)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        async with mcp.running():
            yield
        await run_in_threadpool(runner.close)

    app = FastAPI(
        title="dreamer",
        version="0.1.0",
        lifespan=lifespan,
        description="The online companion: append, recall, context, agent writes and flush.",
        dependencies=[Depends(utf8_ids)],
    )
    app.state.rt, app.state.flusher, app.state.metrics, app.state.auth = rt, runner, metrics, auth
    add_error_handlers(app)
    _ops_routes(app, rt, runner, metrics, auth)
    _session_routes(app, rt, runner, auth)
    _memory_routes(app, rt, auth)
    review_routes(app, rt, auth)
    code_routes(app, rt, auth)
    team_routes(app, rt, auth)
    _context_routes(app, rt, auth)
    mount_ui(app, rt, auth)  # the inspector's pages at /ui
    app.router.routes.append(Route(MCP_PATH, mcp, include_in_schema=False))  # MCP over streamable HTTP
    app.add_middleware(BodyLimit, limit=rt.settings.api_max_body_bytes)
    paths = (getattr(r, "path", "{") for r in app.routes)
    fixed = frozenset(p for p in paths if "{" not in p)
    app.add_middleware(Observe, metrics=metrics, auth=auth, busy=CoalescedBusy(rt.busy), fixed_paths=fixed)
    app.add_middleware(OneAuthorization)  # outermost: nothing reads the header before it
    return app


def _ops_routes(app: FastAPI, rt: Runtime, runner: FlushRunner, metrics: Metrics, auth: Auth) -> None:
    """Health, Prometheus metrics and the token's status."""

    @app.get("/healthz", tags=["ops"])
    def healthz() -> Answer:
        with session_scope(rt.engine) as s:
            s.execute(text("SELECT 1"))
        return {"ok": True}

    @app.get("/metrics", tags=["ops"])
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/status", tags=["ops"])
    def status(g: Grant = Depends(auth.grant)) -> Answer:
        """Counts for the token's scope, the last dream run, and how recall and flush run."""
        return {**_status(rt, g, runner), **modes_status(rt)}


def _session_routes(app: FastAPI, rt: Runtime, runner: FlushRunner, auth: Auth) -> None:
    """Appending to a live session (with its meter) and flushing it."""

    @app.post("/v1/sessions/{session_id}/messages", tags=["sessions"])
    def append_messages(
        body: AppendIn,
        session_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS),
        g: Grant = Depends(auth.writer),
    ) -> Answer:
        """Append new messages; returns the context meter and whether a flush was scheduled.

        Without messages it reads (or reports a figure to) the meter of an existing session.
        """
        _path_identifier("session_id", session_id)
        _same_scope(body, g)
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        if not messages and not body.compacted:
            _own_session_id(rt, g, session_id)
        if (elsewhere := modal_write(rt, g.scope, said_turns(messages))) is not None:
            return elsewhere
        meter = append(
            rt,
            g.scope,
            session_id,
            messages,
            context_tokens=body.context_tokens,
            compacted=body.compacted,
            runner=runner,
        )
        return meter.as_json()

    @app.post("/v1/sessions/{session_id}/flush", tags=["sessions"])
    def flush_now(
        session_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS), g: Grant = Depends(auth.writer)
    ) -> Answer:
        """Flush the session's content since its last flush now, and return the notes."""
        _path_identifier("session_id", session_id)
        return _flush_answer(flush_session(rt, _own_session_id(rt, g, session_id)), session_id, rt.settings)


def _memory_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """Recall, the context block, and the agent's own writes."""

    @app.post("/v1/recall", tags=["memory"])
    def recall_memories(body: ProjectRecallIn, g: Grant = Depends(auth.grant)) -> Answer:
        """Hybrid search over the token's memories (full text only without an embedder); with a
        `project`, its experience entries and state fields matching the query too (`code_work`)."""
        when = {"since": body.since, "until": body.until}
        return modal_recall(rt, body.query, g.scope, k=body.k, project=body.project, kinds=body.kinds, **when)

    @app.get("/v1/context", tags=["memory"])
    def context_block(
        budget: int | None = Query(None, ge=0, le=MAX_CONTEXT_BUDGET),
        project: str | None = Query(None, min_length=1, max_length=255),
        g: Grant = Depends(auth.grant),
    ) -> Answer:
        """Preferences and profile to inject, ranked and cut to the token budget; with a
        `project`, its experience entries and state fields after them."""
        if project is not None:
            _path_identifier("project", project)
        return modal_context(rt, g.scope, budget, project)

    @app.post("/v1/memories", tags=["memory"])
    def remember_memory(body: MemoryIn, g: Grant = Depends(auth.writer)) -> Answer:
        """Remember a fact through the dreamer's consolidation (a duplicate merges)."""
        sid = _own_session_id(rt, g, body.session_id) if body.session_id else None
        if (elsewhere := modal_write(rt, g.scope, [("user", body.text)])) is not None:
            return elsewhere
        w = remember(rt, g.scope, body.text, body.kind, session_id=sid, topic=body.topic, cardinality=body.cardinality)
        return written_json(w)

    @app.delete("/v1/memories/{memory_id}", tags=["memory"])
    def forget(
        memory_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS),
        reason: str = Query("forgotten by the agent", min_length=1, max_length=500),
        g: Grant = Depends(auth.writer),
    ) -> Answer:
        """Forget one of the token's memories (kept for history, never returned by default)."""
        _path_identifier("memory_id", memory_id)
        return memory_json(forget_memory(rt, g.scope, memory_id, clean_text(reason)))


def _context_routes(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """Compacting an agent's active context, and reading back what it offloaded."""

    @app.post("/v1/context/compact", tags=["context"])
    def compact(body: CompactIn, g: Grant = Depends(auth.writer)) -> Answer:
        """Clear old tool output (or, when that is not enough, keep the newest turns and offload
        the older ones whole, summarised when a model is configured) so the context fits; returns
        the new messages and the ids of the bodies offloaded."""
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        found = compact_context(
            rt, g.scope, messages, budget=body.budget, env_state=body.env_state, session_id=body.session_id
        )
        return found.as_json()

    @app.get("/v1/context/offloaded/{offload_id}", tags=["context"])
    def offloaded(
        offload_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS), g: Grant = Depends(auth.grant)
    ) -> Answer:
        """The body a compaction offloaded, by its marker's id (only the token's own)."""
        _path_identifier("offload_id", offload_id)
        return restore_offloaded(rt, g.scope, offload_id)


def _flush_answer(result: FlushResult, session_id: str, settings: Settings) -> Answer:
    """A flush as a client sees it: its own session id (not the store's row number) and the
    note's file relative to the workspace (not where the server keeps it)."""
    data = result.as_json()
    data["session_id"] = session_id
    data["path"] = _in_workspace(result.path, settings.workspace_dir)
    return data


def _in_workspace(path: str | None, workspace: Path) -> str | None:
    if path is None:
        return None
    try:
        return Path(path).resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return None


def _path_identifier(name: str, value: str) -> None:
    """A path id is not a pydantic field: checked as `Ident` checks it."""
    if problem := identifier_problem(value):
        raise HTTPException(422, f"{name} contains {problem}")


def _same_scope(body: AppendIn, g: Grant) -> None:
    if body.user_id is not None and body.user_id != g.user_id:
        raise HTTPException(403, "user_id in the body differs from the token's user")
    if body.agent_id is not None and body.agent_id != g.agent_id:
        raise HTTPException(403, "agent_id in the body differs from the token's agent")


def _own_session_id(rt: Runtime, g: Grant, external_id: str) -> int:
    """The store's id of the grant's session `external_id`; NotFound when it has none."""
    return own_session_id(rt, g.scope, external_id)


def _status(rt: Runtime, g: Grant, runner: FlushRunner) -> Answer:
    scope = g.scope
    with session_scope(rt.engine) as s:
        ids = scope.where(select(Session.id), Session)
        sessions = s.exec(select(func.count()).select_from(ids.subquery())).one()
        messages = s.exec(select(func.count()).select_from(Message).where(col(Message.session_id).in_(ids))).one()
        by_status = _memory_counts(s, scope)
        notes = s.exec(
            select(func.count())
            .select_from(DailyNote)
            .where(col(DailyNote.session_id).in_(ids))
            .where(DailyNote.position >= 0)
        ).one()
        last = s.exec(select(DreamRun).order_by(col(DreamRun.id).desc()).limit(1)).first()
    return {
        "user_id": g.user_id,
        "agent_id": g.agent_id,
        "team": g.team,
        "role": g.role,
        "sessions": sessions,
        "messages": messages,
        "memories": by_status,
        "daily_notes": notes,
        "flushes_pending": runner.pending,
        "flush_point": flush_point(rt.settings),
        "recall": "hybrid" if rt.embedder is not None else "text-only",
        "extractor": f"llm:{rt.llm.name}" if rt.llm is not None else "rules",
        "last_dream_run": None if last is None else _dream_run_json(last),
    }


def _dream_run_json(run: DreamRun) -> Answer:
    return {
        "id": run.id,
        "status": run.status,
        "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def _memory_counts(s: DBSession, scope: Scope) -> dict[str, int]:
    q = scope.where(select(Memory.status, func.count()), Memory)
    return {status: n for status, n in s.exec(q.group_by(col(Memory.status))).all()}
