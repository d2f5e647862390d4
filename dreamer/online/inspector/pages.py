"""The inspector at `/ui` on `dreamer serve`: server-rendered pages (Jinja2, autoescaped) and
plain forms, no JavaScript build step. Memories by scope with search, kind and status filters;
one memory with its evidence and history; the trace of a fact; runs with every change and
rejection; quarantined sessions; the review queue; the settings in effect. Reads go through
`ui_queries`, actions through `person` and `engine.revert`; logins and CSRF are `ui_session`'s."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Form, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader
from starlette.concurrency import run_in_threadpool

from dreamer.core.errors import NotFound
from dreamer.engine.runtime import Runtime
from dreamer.online.auth import Auth
from dreamer.online.inspector import queries as q
from dreamer.online.inspector.actions import action_routes
from dreamer.online.inspector.login import COOKIE, Login, LoginRequired, Logins
from dreamer.online.inspector.person import PersonRefused, ReadOnly

# every value is escaped: a memory's text is data, whatever HTML or script it holds
TEMPLATES = Jinja2Templates(
    env=Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=True)
)


def mount_ui(app: FastAPI, rt: Runtime, auth: Auth) -> None:
    """Add the inspector's pages and forms to `app`."""
    logins = Logins(auth, rt.settings.ui_admin_token, rt.settings.ui_session_minutes)
    router = APIRouter(prefix="/ui", include_in_schema=False, route_class=UiRoute)
    _login_routes(router, logins)
    _read_routes(router, rt, logins)
    action_routes(router, rt, logins)
    app.include_router(router)


def page(request: Request, name: str, login: Login | None, status: int = 200, **values: Any) -> HTMLResponse:
    out: HTMLResponse = TEMPLATES.TemplateResponse(request, name, {"login": login, **values}, status_code=status)
    return out


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


def _read_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("")
    def memories(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        p = request.query_params
        f = q.Filters(p.get("q", ""), p.get("kind", ""), p.get("status", ""), p.get("user", ""))
        rows = q.memories(rt, login.viewer, f)
        kinds = q.kinds(rt, login.viewer)
        return page(request, "memories.html", login, rows=rows, f=f, kinds=kinds, statuses=q.STATUSES)

    @router.get("/memories/{memory_id}")
    def memory(request: Request, memory_id: str, login: Login = Depends(logins.login)) -> HTMLResponse:
        found = q.memory_page(rt, login.viewer, memory_id)
        return page(request, "memory.html", login, p=found)

    @router.get("/review")
    def review(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "review.html", login, rows=q.review_queue(rt, login.viewer))

    @router.get("/runs")
    def runs(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "runs.html", login, runs=q.runs(rt, login.viewer))

    @router.get("/runs/{run_id}")
    def run(request: Request, run_id: int, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "run.html", login, p=q.run_page(rt, login.viewer, run_id))

    @router.get("/sessions")
    def sessions(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "sessions.html", login, rows=q.quarantined(rt, login.viewer))

    @router.get("/trace")
    async def trace(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        fact, user = request.query_params.get("fact", "").strip(), request.query_params.get("user", "")
        owner = login.viewer.user_id or user
        found = await run_in_threadpool(_trace, rt, fact, owner) if fact and owner else None
        return page(request, "trace.html", login, fact=fact, user=user, t=found)

    @router.get("/settings")
    def settings(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "settings.html", login, rows=q.settings_shown(rt.settings))


def _trace(rt: Runtime, fact: str, user_id: str) -> Any:
    from dreamer.online.trace import trace

    return trace(rt, fact, user_id)


class UiRoute(APIRoute):
    """A route of the inspector: its expected failures are pages, not JSON (the API's errors
    keep their JSON handlers): no login -> the login form (403 for a form sent), a refused
    action -> 400, an unknown memory, run or session -> 404, a bad form field -> 400."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except LoginRequired:
                if request.method != "GET":
                    return page(request, "error.html", None, 403, error="log in first")
                return RedirectResponse("/ui/login", status_code=303)
            except ReadOnly as exc:
                return page(request, "error.html", None, 403, error=str(exc))
            except PersonRefused as exc:
                return page(request, "error.html", None, 400, error=str(exc))
            except NotFound as exc:
                return page(request, "error.html", None, 404, error=str(exc))
            except HTTPException as exc:
                return page(request, "error.html", None, exc.status_code, error=str(exc.detail))
            except RequestValidationError:
                return page(request, "error.html", None, 400, error="a field of the form is missing or invalid")

        return handle
