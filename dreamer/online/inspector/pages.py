"""The inspector at `/ui` on `dreamer serve`: server-rendered pages (Jinja2, autoescaped) and
plain forms, no JavaScript at all. Memories by scope, paged with their total, found by their
words, their id's first characters or their meaning, with kind, status and user filters; one
memory with its evidence, its history and the change held for it; the review queue (one action
for many items: `bulk`); the conversations (`conversations`); the context block a user's agent
gets (`looking`); the trace of a fact; runs with every change and rejection; quarantined
sessions; export, import and forget (`records`); the settings in effect. Reads go through
`queries`, actions through `person` and `engine.records`; logins and CSRF are `login`'s, pages
and their headers `render`'s."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from dreamer.core.models import STATUSES
from dreamer.engine.runtime import Runtime
from dreamer.online.agent_writes import AGENT_WRITE_KINDS
from dreamer.online.auth import Auth
from dreamer.online.inspector import queries as q
from dreamer.online.inspector.actions import action_routes
from dreamer.online.inspector.bulk import bulk_routes
from dreamer.online.inspector.conversations import conversation_routes
from dreamer.online.inspector.login import COOKIE, Login, Logins
from dreamer.online.inspector.looking import by_meaning, looking_routes
from dreamer.online.inspector.paging import paging_of
from dreamer.online.inspector.records import records_routes
from dreamer.online.inspector.render import UiRoute, page, style_sheet


def mount_ui(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """Add the inspector's pages and forms to `app`."""
    logins = Logins(auth, rt.settings.ui_admin_token, rt.settings.ui_session_minutes)
    router = APIRouter(prefix="/ui", include_in_schema=False, route_class=UiRoute)
    router.add_api_route("/inspector.css", style_sheet, methods=["GET"])
    _login_routes(router, logins)
    _memory_routes(router, rt, logins)
    _read_routes(router, rt, logins)
    action_routes(router, rt, logins)
    bulk_routes(router, rt, logins)
    conversation_routes(router, rt, logins)
    looking_routes(router, rt, logins)
    records_routes(router, rt, logins)
    app.include_router(router)


def _login_routes(router: APIRouter, logins: Logins) -> None:
    @router.get("/login")
    def login_form(request: Request) -> HTMLResponse:
        return page(request, "login.html", None)

    @router.post("/login")
    def login(request: Request, token: str = Form("")) -> Response:
        sid = logins.open(token)
        if sid is None:
            return page(request, "login.html", None, 401, error="unknown token")
        out = RedirectResponse("/ui", status_code=303)
        out.set_cookie(COOKIE, sid, httponly=True, samesite="strict", path="/ui", max_age=logins.seconds)
        return out


def _memory_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("")
    async def memories(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        p = request.query_params
        how = "meaning" if p.get("how") == "meaning" else "text"
        f = q.Filters(p.get("q", ""), p.get("kind", ""), p.get("status", ""), p.get("user", "").strip(), how)
        paging, scores, mode = paging_of(request), {}, ""
        if how == "meaning":
            found = await run_in_threadpool(by_meaning, rt, login.viewer, f, paging)
            rows, scores, mode = found.rows, found.scores, found.mode
        else:
            rows = await run_in_threadpool(q.memories, rt, login.viewer, f, paging)
        values: dict[str, Any] = {"kinds": q.kinds(rt, login.viewer), "users": q.users(rt, login.viewer)}
        values |= {"statuses": STATUSES, "new_kinds": AGENT_WRITE_KINDS, "scores": scores, "mode": mode}
        return page(request, "memories.html", login, p=rows, f=f, **values)

    @router.get("/memories/{memory_id}")
    def memory(request: Request, memory_id: str, login: Login = Depends(logins.login)) -> HTMLResponse:
        found = q.memory_page(rt, login.viewer, memory_id)
        return page(request, "memory.html", login, p=found)


def _read_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("/review")
    def review(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        user = request.query_params.get("user", "").strip()
        rows = q.review_queue(rt, login.viewer, paging_of(request), user)
        ticked = request.query_params.get("select") == "all"
        values: dict[str, Any] = {"ticked": ticked, "done": _done(request), "user": user}
        values["users"] = q.users(rt, login.viewer)
        return page(request, "review.html", login, p=rows, **values)

    @router.get("/runs")
    def runs(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "runs.html", login, p=q.runs(rt, login.viewer, paging_of(request)))

    @router.get("/runs/{run_id}")
    def run(request: Request, run_id: int, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "run.html", login, p=q.run_page(rt, login.viewer, run_id))

    @router.get("/sessions")
    def sessions(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "sessions.html", login, p=q.quarantined(rt, login.viewer, paging_of(request)))

    @router.get("/trace")
    async def trace(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        fact, user = request.query_params.get("fact", "").strip(), request.query_params.get("user", "")
        owner = login.viewer.user_id or user
        found = await run_in_threadpool(_trace, rt, fact, owner) if fact and owner else None
        return page(request, "trace.html", login, fact=fact, user=user, t=found, users=q.users(rt, login.viewer))

    @router.get("/settings")
    def settings(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "settings.html", login, rows=q.settings_shown(rt.settings))


def _done(request: Request) -> dict[str, Any] | None:
    """What the bulk action just sent did, from the redirect's query: its action and counts."""
    p = request.query_params
    if p.get("done") not in ("accept", "reject", "forget"):
        return None
    counts = {k: int(v) if (v := p.get(k, "0")).isdigit() else 0 for k in ("n", "refused")}
    return {"action": p["done"], **counts}


def _trace(rt: Runtime, fact: str, user_id: str) -> Any:
    from dreamer.online.trace import trace

    return trace(rt, fact, user_id)
