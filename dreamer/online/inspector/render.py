"""How the inspector answers: its pages rendered from `templates/` (Jinja2, every value escaped),
its failures as pages rather than JSON (`UiRoute`), and the headers every answer carries: a
Content-Security-Policy that lets a page load nothing but its own style sheet and post forms
only to the inspector (no script runs, whatever a memory holds), no framing, no referrer."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader

from dreamer.core.errors import NotFound
from dreamer.online.inspector.login import Login, LoginRequired
from dreamer.online.inspector.paging import page_link
from dreamer.online.inspector.person import PersonRefused, ReadOnly

TEMPLATE_DIR = Path(__file__).parent / "templates"
# every value is escaped: a memory's text is data, whatever HTML or script it holds
TEMPLATES = Jinja2Templates(env=Environment(loader=FileSystemLoader(TEMPLATE_DIR), autoescape=True))
TEMPLATES.env.globals["page_link"] = page_link
TEMPLATES.env.filters["short"] = lambda memory_id: str(memory_id or "")[:12]

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
}
STYLE = (TEMPLATE_DIR / "inspector.css").read_text(encoding="utf-8")


def page(request: Request, name: str, login: Login | None, status: int = 200, **values: Any) -> HTMLResponse:
    out: HTMLResponse = TEMPLATES.TemplateResponse(request, name, {"login": login, **values}, status_code=status)
    return out


def style_sheet() -> Response:
    """The inspector's one style sheet (the policy allows no inline style)."""
    return Response(STYLE, media_type="text/css", headers={"Cache-Control": "max-age=3600"})


class UiRoute(APIRoute):
    """A route of the inspector: its expected failures are pages, not JSON (the API's errors
    keep their JSON handlers): no login -> the login form (403 for a form sent), a refused
    action -> 400, an unknown memory, run or session -> 404, a bad form field -> 400. Every
    answer carries `SECURITY_HEADERS`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            out = await _answer(handler, request)
            for name, value in SECURITY_HEADERS.items():
                out.headers.setdefault(name, value)
            return out

        return handle


async def _answer(handler: Callable[[Request], Coroutine[Any, Any, Response]], request: Request) -> Response:
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
