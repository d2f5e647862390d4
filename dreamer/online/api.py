"""The HTTP API of the online companion (FastAPI): append with the context meter, recall,
context, agent writes, flush, status, health and Prometheus metrics.

Every call acts in the scope of its bearer token (user, and agent and team when the token
names them), never in one named by the body; a reader token cannot write. Requests under
``/v1/`` mark the agent busy for the dreamer while they run.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import re
import time
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
)
from sqlalchemy import func, text
from sqlmodel import select
from starlette.concurrency import run_in_threadpool

from dreamer.core.consolidate import normalise
from dreamer.core.errors import (
    ConfigError,
    DreamerError,
    IndexInUse,
    IngestError,
    LLMError,
    NotFound,
    Retryable,
    ScopeRequired,
    TooLarge,
)
from dreamer.core.models import KINDS, DailyNote, DreamRun, Memory, Message, Session
from dreamer.core.scope import Scope
from dreamer.core.settings import MAX_CONTEXT_BUDGET, MAX_RECALL_K, Settings
from dreamer.ingest.base import MAX_FIELD_CHARS, as_utc, clean_text, identifier_problem
from dreamer.online import flush as flushing
from dreamer.online.agent_writes import AGENT_WRITE_KINDS, WriteRejected, forget_memory, remember
from dreamer.online.recall import context, recall
from dreamer.store.busy import CoalescedBusy, activity_key
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

MIN_TOKEN_CHARS = 16
MAX_MESSAGES_PER_APPEND = 1000
MAX_ERRORS_SHOWN = 20  # a 422 lists at most this many problems
MAX_ECHO_CHARS = 200  # and echoes at most this much of an input
BUSY_PREFIX = "/v1/"
INSECURE_TOKEN = "insecure-single-user-mode"  # never compared: in that mode every request is the user's


# --------------------------------------------------------------------------- text and ids


def _clean(value: Any) -> Any:
    return clean_text(value) if isinstance(value, str) else value


def _identifier(value: str) -> str:
    if problem := identifier_problem(value):
        raise ValueError(f"contains {problem}")
    return value


def _worded(value: str) -> str:
    if len(normalise(value)) < 3:
        raise ValueError("has fewer than 3 characters once punctuation is set aside")
    return value


_NUMBER = re.compile(r"\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*")


def _iso_time(value: Any) -> Any:
    """A time is an ISO 8601 string ("2024-05-01", "2024-05-01T12:00:00Z"), never a number of seconds."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _NUMBER.fullmatch(value)):
        raise ValueError("must be an ISO 8601 date or time, such as 2024-05-01T12:00:00Z")
    return value


# Free text: NUL characters and unpaired surrogates become U+FFFD, as the store keeps them.
Text = Annotated[str, BeforeValidator(_clean)]
ShortText = Annotated[str, Field(max_length=MAX_FIELD_CHARS), BeforeValidator(_clean)]
# Identifiers: refused, never altered, when the store could not keep them as they are.
Ident = Annotated[str, Field(max_length=MAX_FIELD_CHARS), AfterValidator(_identifier)]
GrantId = Annotated[str, Field(min_length=1, max_length=MAX_FIELD_CHARS), AfterValidator(_identifier)]
Time = Annotated[datetime, BeforeValidator(_iso_time)]


# --------------------------------------------------------------------------- tokens


class Grant(BaseModel):
    """One bearer token, bound to a scope and a role."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: str = Field(min_length=MIN_TOKEN_CHARS)
    user_id: GrantId
    agent_id: GrantId | None = None
    team: GrantId | None = None
    role: Literal["writer", "reader"]

    @property
    def scope(self) -> Scope:
        return Scope(user_id=self.user_id, agent_id=self.agent_id, team=self.team)

    @property
    def can_write(self) -> bool:
        return self.role == "writer"


def parse_tokens(raw: str) -> list[Grant]:
    """The grants in `api_tokens` (a JSON list); ConfigError for anything malformed."""
    if not raw or not raw.strip():
        return []
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ConfigError(f"api_tokens is not valid JSON: {exc.msg} at position {exc.pos}") from exc
    if not isinstance(data, list):
        raise ConfigError("api_tokens must be a JSON list of {token, user_id, agent_id?, team?, role} objects")
    grants = []
    for i, item in enumerate(data):
        try:
            grants.append(Grant.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(entry)"
            raise ConfigError(f"api_tokens entry {i}: {where}: {first['msg']}") from exc
    if len({g.token for g in grants}) != len(grants):
        raise ConfigError("api_tokens: the same token appears twice")
    return grants


def insecure_grant(user_id: str) -> Grant:
    """The writer grant of insecure single-user mode; ConfigError for a user id a token could not name."""
    try:
        return Grant(token=INSECURE_TOKEN, user_id=user_id, role="writer")
    except ValidationError as exc:
        raise ConfigError(f"--insecure-single-user: user_id: {exc.errors()[0]['msg']}") from exc


class Auth:
    """Bearer token -> grant; in insecure single-user mode every request is that user's writer."""

    def __init__(self, grants: list[Grant], insecure_user: str | None = None) -> None:
        self.grants = grants
        self.insecure = insecure_grant(insecure_user) if insecure_user else None

    def resolve(self, authorization: str | None) -> Grant | None:
        if self.insecure is not None:
            return self.insecure
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        found = None
        for g in self.grants:  # compare against every token: no early exit on a match
            if hmac.compare_digest(g.token.encode(), token.strip().encode()):
                found = g
        return found


# --------------------------------------------------------------------------- bodies


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(Strict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[dict[str, Any]] | None = None
    name: ShortText | None = None
    tool_call_id: ShortText | None = None
    tool_calls: list[dict[str, Any]] | None = None


class AppendIn(Strict):
    user_id: Ident | None = Field(None, description="must be the token's user when given")
    agent_id: Ident | None = Field(None, description="must be the token's agent when given")
    messages: list[MessageIn] = Field(default_factory=list, max_length=MAX_MESSAGES_PER_APPEND)
    context_tokens: StrictInt | None = Field(
        None, ge=0, le=100_000_000, description="the agent's own count of its context"
    )
    compacted: StrictBool = Field(False, description="the agent compacted its context before these messages")


class RecallIn(Strict):
    query: Text = Field(min_length=1, max_length=4000)
    k: StrictInt | None = Field(None, ge=1, le=MAX_RECALL_K)
    kinds: list[Literal[KINDS]] | None = Field(None, min_length=1, max_length=len(KINDS))  # type: ignore[valid-type]
    since: Time | None = None
    until: Time | None = None


class MemoryIn(Strict):
    text: Annotated[Text, AfterValidator(_worded)] = Field(min_length=3, max_length=600)
    kind: Literal[AGENT_WRITE_KINDS] = "preference"  # type: ignore[valid-type]
    session_id: GrantId | None = Field(None, description="the session it was said in")


# --------------------------------------------------------------------------- metrics


class Metrics:
    """A per-app registry: requests and latencies, flushes, dream runs and LLM tokens."""

    def __init__(self, rt) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "dreamer_http_requests", "HTTP requests served", ["method", "route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "dreamer_http_request_seconds", "HTTP request latency", ["method", "route"], registry=self.registry
        )
        self.flushes = Counter("dreamer_flushes", "Daily-note flushes by outcome", ["status"], registry=self.registry)
        self.flush_tokens = {"prompt": 0, "completion": 0}
        self.registry.register(_StoreCollector(rt, self))

    def flushed(self, result: flushing.FlushResult | None, exc: BaseException | None) -> None:
        self.flushes.labels(status="failed" if exc is not None else result.status).inc()  # type: ignore[union-attr]
        if result is not None:
            self.flush_tokens["prompt"] += result.prompt_tokens
            self.flush_tokens["completion"] += result.completion_tokens


class _StoreCollector:
    """Dream runs and LLM tokens, read from SQL (and this process's flushes) at scrape time."""

    def __init__(self, rt, metrics: Metrics) -> None:
        self.rt = rt
        self.metrics = metrics

    def describe(self):
        return [
            CounterMetricFamily("dreamer_dream_runs", "Dream runs by status", labels=["status"]),
            CounterMetricFamily("dreamer_llm_tokens", "LLM tokens by source and kind", labels=["source", "kind"]),
        ]

    def collect(self):
        runs = CounterMetricFamily("dreamer_dream_runs", "Dream runs by status", labels=["status"])
        tokens = CounterMetricFamily("dreamer_llm_tokens", "LLM tokens by source and kind", labels=["source", "kind"])
        with session_scope(self.rt.engine) as s:
            for status, n in s.exec(select(DreamRun.status, func.count()).group_by(DreamRun.status)).all():
                runs.add_metric([status], n)
            prompt, completion = s.exec(
                select(
                    func.coalesce(func.sum(DreamRun.prompt_tokens), 0),
                    func.coalesce(func.sum(DreamRun.completion_tokens), 0),
                )
            ).one()
        tokens.add_metric(["dream", "prompt"], prompt)
        tokens.add_metric(["dream", "completion"], completion)
        tokens.add_metric(["flush", "prompt"], self.metrics.flush_tokens["prompt"])
        tokens.add_metric(["flush", "completion"], self.metrics.flush_tokens["completion"])
        return [runs, tokens]


# --------------------------------------------------------------------------- middleware


class BodyLimit:
    """413 for a body over `limit` bytes: by Content-Length up front, else while it streams in."""

    def __init__(self, app, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            return await _too_large(send, self.limit)
        seen = 0

        async def limited():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise HTTPException(413, f"request body over {self.limit} bytes")
            return message

        await self.app(scope, limited, send)


async def _too_large(send, limit: int) -> None:
    body = json.dumps({"detail": f"request body over {limit} bytes"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Observe:
    """Request counts and latencies per route; `/v1/` requests mark the agent busy meanwhile."""

    def __init__(self, app, *, metrics: Metrics, auth: Auth, busy, fixed_paths: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.auth = auth
        self.busy = busy
        self.fixed_paths = fixed_paths

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        status = 500
        started = time.perf_counter()
        key = self._busy_key(scope)
        active = False

        async def finish() -> None:
            nonlocal active
            if active:
                active = False
                await run_in_threadpool(self.busy.end, key)

        async def tracked(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                await finish()  # idle again before the client sees the end of the answer
            await send(message)

        if key:
            await run_in_threadpool(self.busy.begin, key)
            active = True
        try:
            await self.app(scope, receive, tracked)
        finally:
            await finish()
            route = self._route(scope)
            self.metrics.requests.labels(scope["method"], route, str(status)).inc()
            self.metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)

    def _route(self, scope) -> str:
        """The route template as label (never a raw path, except the app's fixed ones)."""
        path = getattr(scope.get("route"), "path", None)
        if path:
            return path
        return scope["path"] if scope["path"] in self.fixed_paths else "unmatched"

    def _busy_key(self, scope) -> str | None:
        if not scope["path"].startswith(BUSY_PREFIX):
            return None
        header = dict(scope["headers"]).get(b"authorization")
        grant = self.auth.resolve(header.decode("latin-1") if header else None)
        return activity_key(user_id=grant.user_id, agent_id=grant.agent_id) if grant else None


# --------------------------------------------------------------------------- the app


def create_app(rt, *, insecure_user: str | None = None) -> FastAPI:
    """The API over a runtime; refuses to build without tokens unless `insecure_user` is given."""
    flushing.validate_flush_settings(rt.settings)
    grants = parse_tokens(rt.settings.api_tokens)
    if not grants and not insecure_user:
        raise ConfigError(
            "no API tokens configured (DREAMER_API_TOKENS) and no insecure single user: refusing to serve"
        )
    auth = Auth(grants, insecure_user)
    metrics = Metrics(rt)
    runner = flushing.FlushRunner(rt, workers=rt.settings.flush_workers, on_done=metrics.flushed)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):
        yield
        await run_in_threadpool(runner.close)

    app = FastAPI(
        title="dreamer",
        version="0.1.0",
        lifespan=lifespan,
        description="The online companion: append, recall, context, agent writes and flush.",
    )
    app.state.rt, app.state.flusher, app.state.metrics, app.state.auth = rt, runner, metrics, auth
    _errors(app)
    _routes(app, rt, runner, metrics, auth)
    app.add_middleware(BodyLimit, limit=rt.settings.api_max_body_bytes)
    fixed = frozenset(r.path for r in app.routes if "{" not in getattr(r, "path", "{"))
    app.add_middleware(Observe, metrics=metrics, auth=auth, busy=CoalescedBusy(rt.busy), fixed_paths=fixed)
    return app


_STATUS = (
    (NotFound, 404),
    (TooLarge, 413),
    (IngestError, 422),
    (WriteRejected, 409),
    (ScopeRequired, 400),
    (IndexInUse, 503),
    (LLMError, 502),
    (Retryable, 503),
    (DreamerError, 500),
)


def _errors(app: FastAPI) -> None:
    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        code = next(c for kind, c in _STATUS if isinstance(exc, kind))
        if code >= 500:
            log.error("request failed: %s: %s", type(exc).__name__, exc)
        return JSONResponse({"detail": clean_text(str(exc))}, status_code=code)

    async def invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse({"detail": validation_detail(exc.errors())}, status_code=422)

    for kind, _ in _STATUS:
        app.add_exception_handler(kind, handle)
    app.add_exception_handler(RequestValidationError, invalid)


def validation_detail(errors: list[dict]) -> list[dict]:
    """The first `MAX_ERRORS_SHOWN` problems (then how many more), each echoing its input cut short
    and made JSON: NaN, infinities and undecodable bytes as text."""
    shown = [{**e, "input": _echo(e["input"])} if "input" in e else e for e in errors[:MAX_ERRORS_SHOWN]]
    encoded = jsonable_encoder(shown)  # every input is short by now, however deep it came
    if len(errors) > MAX_ERRORS_SHOWN:
        encoded.append(
            {"type": "too_many_errors", "loc": [], "msg": f"{len(errors) - MAX_ERRORS_SHOWN} more not shown"}
        )
    return _encodable(encoded)


def _echo(value: Any) -> Any:
    try:
        value = _json_safe(value)
    except RecursionError:
        return "nested too deeply, not shown"
    if isinstance(value, str) and len(value) > MAX_ECHO_CHARS:
        return value[:MAX_ECHO_CHARS] + "..."
    if isinstance(value, (list, dict)) and len(json.dumps(value, default=str)) > MAX_ECHO_CHARS:
        return f"{'an array' if isinstance(value, list) else 'an object'} of {len(value)} items, not shown"
    return value


def _json_safe(value: Any) -> Any:
    """`value` with bytes decoded (undecodable bytes replaced) and NaN or infinities as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _json_safe(v) for k, v in value.items()}
    return value


def _encodable(value: Any) -> Any:
    """JSON data with every string (keys too) as UTF-8 can encode it: an echoed input may not be."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, list):
        return [_encodable(v) for v in value]
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    return value


def _routes(app: FastAPI, rt, runner: flushing.FlushRunner, metrics: Metrics, auth: Auth) -> None:
    def grant(request: Request) -> Grant:
        found = auth.resolve(request.headers.get("authorization"))
        if found is None:
            raise HTTPException(401, "missing or unknown bearer token", headers={"WWW-Authenticate": "Bearer"})
        return found

    def writer(g: Grant = Depends(grant)) -> Grant:
        if not g.can_write:
            raise HTTPException(403, "this token may only read")
        return g

    @app.get("/healthz", tags=["ops"])
    def healthz() -> dict:
        with session_scope(rt.engine) as s:
            s.exec(text("SELECT 1"))
        return {"ok": True}

    @app.get("/metrics", tags=["ops"])
    def prometheus() -> Response:
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/sessions/{session_id}/messages", tags=["sessions"])
    def append_messages(
        body: AppendIn,
        session_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS),
        g: Grant = Depends(writer),
    ) -> dict:
        """Append new messages; returns the context meter and whether a flush was scheduled.

        Without messages it reads (or reports a figure to) the meter of an existing session.
        """
        _path_identifier("session_id", session_id)
        _same_scope(body, g)
        messages = [m.model_dump(exclude_none=True) for m in body.messages]
        if not messages and not body.compacted:
            _own_session(rt, g, session_id)
        meter = flushing.append(
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
        session_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS), g: Grant = Depends(writer)
    ) -> dict:
        """Flush the session's content since its last flush now, and return the notes."""
        _path_identifier("session_id", session_id)
        return _flush_answer(flushing.flush_session(rt, _own_session(rt, g, session_id).id), session_id, rt.settings)

    @app.post("/v1/recall", tags=["memory"])
    def recall_memories(body: RecallIn, g: Grant = Depends(grant)) -> dict:
        """Hybrid search over the token's memories (full text only without an embedder)."""
        found = recall(rt, body.query, g.scope, k=body.k, kinds=body.kinds, since=body.since, until=body.until)
        return found.as_json()

    @app.get("/v1/context", tags=["memory"])
    def context_block(budget: int | None = Query(None, ge=0, le=MAX_CONTEXT_BUDGET), g: Grant = Depends(grant)) -> dict:
        """Preferences and profile to inject, ranked and cut to the token budget."""
        return context(rt, g.scope, budget_tokens=budget).as_json()

    @app.post("/v1/memories", tags=["memory"])
    def remember_memory(body: MemoryIn, g: Grant = Depends(writer)) -> dict:
        """Remember a fact through the dreamer's consolidation (a duplicate merges)."""
        sid = _own_session(rt, g, body.session_id).id if body.session_id else None
        m = remember(rt, g.scope, body.text, body.kind, session_id=sid)
        return _memory_json(m)

    @app.delete("/v1/memories/{memory_id}", tags=["memory"])
    def forget(
        memory_id: str = PathParam(min_length=1, max_length=MAX_FIELD_CHARS),
        reason: str = Query("forgotten by the agent", min_length=1, max_length=500),
        g: Grant = Depends(writer),
    ) -> dict:
        """Forget one of the token's memories (kept for history, never returned by default)."""
        _path_identifier("memory_id", memory_id)
        return _memory_json(forget_memory(rt, g.scope, memory_id, clean_text(reason)))

    @app.get("/v1/status", tags=["ops"])
    def status(g: Grant = Depends(grant)) -> dict:
        """Counts for the token's scope, the last dream run, and how recall and flush run."""
        return _status(rt, g, runner)


def _flush_answer(result: flushing.FlushResult, session_id: str, settings: Settings) -> dict:
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


def _own_session(rt, g: Grant, external_id: str) -> Session:
    with session_scope(rt.engine) as s:
        sess = flushing.owned_session(s, g.scope, external_id)
    if sess is None:
        raise NotFound(f"no session {external_id}")
    return sess


def _memory_json(m: Memory) -> dict:
    return {
        "memory_id": m.id,
        "text": m.text,
        "kind": m.kind,
        "status": m.status,
        "source": m.source,
        "evidence": m.evidence,
        "created_at": as_utc(m.created_at).isoformat(),
        "updated_at": as_utc(m.updated_at).isoformat(),
    }


def _status(rt, g: Grant, runner: flushing.FlushRunner) -> dict:
    scope = g.scope
    with session_scope(rt.engine) as s:
        ids = scope.where(select(Session.id), Session)
        sessions = s.exec(select(func.count()).select_from(ids.subquery())).one()
        messages = s.exec(select(func.count()).select_from(Message).where(Message.session_id.in_(ids))).one()
        by_status = _memory_counts(s, scope)
        notes = s.exec(
            select(func.count())
            .select_from(DailyNote)
            .where(DailyNote.session_id.in_(ids))
            .where(DailyNote.position >= 0)
        ).one()
        last = s.exec(select(DreamRun).order_by(DreamRun.id.desc()).limit(1)).first()
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
        "flush_point": flushing.flush_point(rt.settings),
        "recall": "hybrid" if rt.embedder is not None else "text-only",
        "extractor": f"llm:{rt.llm.name}" if rt.llm is not None else "rules",
        "last_dream_run": None
        if last is None
        else {
            "id": last.id,
            "status": last.status,
            "started_at": last.started_at.isoformat(),
            "finished_at": last.finished_at.isoformat() if last.finished_at else None,
        },
    }


def _memory_counts(s, scope: Scope) -> dict[str, int]:
    q = scope.where(select(Memory.status, func.count()), Memory)
    return {status: n for status, n in s.exec(q.group_by(Memory.status)).all()}


__all__ = ["Auth", "Grant", "create_app", "parse_tokens"]
