"""The inspector's reads that go through recall as an agent's do: the memories nearest in meaning
to a query (the hybrid recall `POST /v1/recall` runs: dense and BM25 fused, full text alone
without an embedder), and a preview of the context block a user's agent would be given now (what
`GET /v1/context` answers, in the configured memory mode). The admin names the user."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse
from sqlmodel import col, select
from starlette.concurrency import run_in_threadpool

from dreamer.core.models import Memory
from dreamer.core.settings import MAX_CONTEXT_BUDGET
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector import queries as q
from dreamer.online.inspector.login import Login, Logins
from dreamer.online.inspector.paging import Paged, Paging
from dreamer.online.inspector.person import PersonRefused, Viewer
from dreamer.online.inspector.render import page
from dreamer.online.modes import modal_context
from dreamer.online.recall import recall
from dreamer.store.db import session_scope

MEANING_MAX = 200  # the most hits a search by meaning pages through


@dataclass
class Found:
    """A page of memories found by meaning, each with its recall score."""

    rows: Paged[Memory]
    scores: dict[str, float] = field(default_factory=dict)
    mode: str = ""  # hybrid | dense | text | text-only, as recall says


def by_meaning(rt: Runtime, viewer: Viewer, f: q.Filters, paging: Paging) -> Found:
    """The viewer's memories nearest in meaning to `f.q`, best first (current ones only, unless a
    status is asked for), narrowed by kind and status."""
    if not f.q.strip():
        raise PersonRefused("write what to search for by meaning")
    scope = viewer.scope_of(f.user)
    kinds = [f.kind] if f.kind else None
    found = recall(rt, f.q.strip(), scope, k=MEANING_MAX, kinds=kinds, include_all=bool(f.status))
    hits = [h for h in found.hits if not f.status or h.status == f.status]
    cut = paging.cut(hits)
    ids = [h.memory_id for h in cut.rows]
    with session_scope(rt.engine) as s:
        rows = {m.id: m for m in s.exec(select(Memory).where(col(Memory.id).in_(ids))).all()} if ids else {}
    kept = [rows[i] for i in ids if i in rows]
    return Found(Paged(kept, cut.total, paging), {h.memory_id: h.score for h in cut.rows}, found.mode)


def context_preview(rt: Runtime, viewer: Viewer, user: str, budget: int | None) -> dict[str, Any]:
    """The context block the user's agent would be given now, with the memories in it."""
    answer = modal_context(rt, viewer.scope_of(user), budget)
    ids = list(answer.get("memory_ids") or [])
    with session_scope(rt.engine) as s:
        rows = {m.id: m for m in s.exec(select(Memory).where(col(Memory.id).in_(ids))).all()} if ids else {}
    return {**answer, "memories": [rows[i] for i in ids if i in rows]}


def looking_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("/context")
    async def context(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        params = request.query_params
        user, budget = params.get("user", "").strip(), _budget(params.get("budget", ""))
        owner = login.viewer.user_id or user
        block = await run_in_threadpool(context_preview, rt, login.viewer, owner, budget) if owner else None
        users = q.users(rt, login.viewer)
        return page(request, "context.html", login, block=block, user=user, budget=budget or "", users=users)


def _budget(raw: str) -> int | None:
    """The token budget asked for; none (the setting's) when empty, refused when not a number in range."""
    if not raw.strip():
        return None
    try:
        value = int(raw)
    except ValueError:
        raise PersonRefused("the budget is a number of tokens") from None
    if not 0 <= value <= MAX_CONTEXT_BUDGET:
        raise PersonRefused(f"the budget is between 0 and {MAX_CONTEXT_BUDGET} tokens")
    return value
