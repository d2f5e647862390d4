"""The store as a whole from the inspector, as `dreamer export`, `import` and `forget` do it:

* export: the viewer's user (the admin: any user, or everything) as the JSON lines of
  `engine.records.transfer`, with or without the transcripts, downloaded;
* import (the admin only: a file may hold any user's records): the file is read and checked, then
  imported dry (`dry_run`: what would be added, what is there already, nothing kept) and shown;
  only the person's confirmation imports it, from the copy this process kept for their login;
* forget what came from a session (or a range of its messages), or a whole user (the admin only):
  the dry-run list first (`engine.records.cascade`), then the person confirms, and each event
  names them."""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, Response, StreamingResponse
from sqlmodel import col, select
from starlette.concurrency import run_in_threadpool

from dreamer.core.errors import IngestError, NotFound
from dreamer.core.models import Memory, Session
from dreamer.engine import outbox
from dreamer.engine.records.cascade import Cascade, Selection, forget_derived
from dreamer.engine.records.transfer import export_records, import_records, read_records, with_trailer
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector import queries as q
from dreamer.online.inspector.login import Login, Logins, check_csrf
from dreamer.online.inspector.person import PersonRefused, ReadOnly, Viewer
from dreamer.online.inspector.render import page
from dreamer.store.db import session_scope

KEEP_SECONDS = 900  # how long a checked import waits for its confirmation


class Staged:
    """The checked records of an import waiting for its confirmation, one per login (by its CSRF
    token, which no other login knows), kept in this process for `KEEP_SECONDS`."""

    def __init__(self) -> None:
        self._by_login: dict[str, tuple[float, list[dict[str, Any]]]] = {}
        self._lock = threading.Lock()

    def keep(self, login: Login, records: list[dict[str, Any]]) -> None:
        with self._lock:
            now = time.monotonic()
            self._by_login = {k: v for k, v in self._by_login.items() if v[0] > now}
            self._by_login[login.csrf] = (now + KEEP_SECONDS, records)

    def take(self, login: Login) -> list[dict[str, Any]]:
        with self._lock:
            found = self._by_login.pop(login.csrf, None)
        if found is None or found[0] <= time.monotonic():
            raise PersonRefused("no import waits for confirmation: choose the file again")
        return found[1]


def records_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    _export_routes(router, rt, logins)
    _import_routes(router, rt, logins, Staged())
    _forget_routes(router, rt, logins)


def _export_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("/records")
    def records(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        return page(request, "records.html", login, users=q.users(rt, login.viewer))

    @router.get("/export")
    def export(request: Request, login: Login = Depends(logins.login)) -> Response:
        user = _export_user(login.viewer, request.query_params.get("user", "").strip())
        sessions = request.query_params.get("sessions", "") in ("1", "on", "yes")
        name = re.sub(r"[^A-Za-z0-9_.-]+", "_", user or "all")
        return StreamingResponse(
            _lines(rt, user, sessions),
            media_type="application/x-ndjson",
            headers={"Content-Disposition": f'attachment; filename="dreamer-{name}.jsonl"'},
        )


def _export_user(viewer: Viewer, user: str) -> str | None:
    """Whose records an export holds: the admin's choice (none: everything), else the user's own."""
    if viewer.admin:
        return user or None
    if not viewer.whole_user:
        raise ReadOnly("an agent's login sees part of its user's store: export with a user's token or as the admin")
    return viewer.user_id


def _lines(rt: Runtime, user: str | None, sessions: bool) -> Iterator[str]:
    for rec in with_trailer(export_records(rt.engine, user_id=user, sessions=sessions)):
        yield json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n"


def _import_routes(router: APIRouter, rt: Runtime, logins: Logins, staged: Staged) -> None:
    @router.post("/import")
    async def check(
        request: Request, file: UploadFile = File(...), csrf: str = Form(""), login: Login = Depends(logins.login)
    ) -> HTMLResponse:
        _admin_acting(login, csrf)
        raw = (await file.read()).decode("utf-8", errors="replace")
        try:
            records = read_records(raw.splitlines())
            dry = await run_in_threadpool(import_records, rt.engine, records, dry_run=True)
        except IngestError as exc:
            raise PersonRefused(f"not imported: {exc}") from exc
        staged.keep(login, records)
        return page(request, "import.html", login, result=dry, applied=False, filename=file.filename or "")

    @router.post("/import/confirm")
    async def confirm(request: Request, csrf: str = Form(""), login: Login = Depends(logins.login)) -> HTMLResponse:
        _admin_acting(login, csrf)
        records = staged.take(login)
        try:
            done = await run_in_threadpool(import_records, rt.engine, records)
        except IngestError as exc:
            raise PersonRefused(f"not imported: {exc}") from exc
        await run_in_threadpool(outbox.drain, rt, users=sorted(done.users))  # the index and the Markdown follow
        return page(request, "import.html", login, result=done, applied=True, filename="")


def _admin_acting(login: Login, csrf: str) -> None:
    check_csrf(login, csrf)
    if not login.viewer.admin:
        raise ReadOnly("only the admin imports: a file may hold any user's records")


def _forget_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.get("/forget")
    async def dry(request: Request, login: Login = Depends(logins.login)) -> HTMLResponse:
        p = request.query_params
        sel = _selection(rt, login.viewer, p.get("user", ""), p.get("session", ""), p.get("from", ""), p.get("to", ""))
        plan = await run_in_threadpool(forget_derived, rt, sel, dry_run=True)
        return page(request, "forget.html", login, plan=plan, texts=_texts(rt, plan), applied=False)

    @router.post("/forget")
    async def apply(
        request: Request,
        user: str = Form(""),
        session: str = Form(""),
        first: str = Form("", alias="from"),
        last: str = Form("", alias="to"),
        csrf: str = Form(""),
        login: Login = Depends(logins.login),
    ) -> HTMLResponse:
        check_csrf(login, csrf)
        if not login.viewer.writer:
            raise ReadOnly("this login may only look: log in with a writer token to change anything")
        sel = _selection(rt, login.viewer, user, session, first, last)
        done = await run_in_threadpool(lambda: forget_derived(rt, sel, actor=login.viewer.actor))
        if sel.session is not None:
            await run_in_threadpool(outbox.drain, rt, users=[sel.user_id])  # the index and the Markdown follow
        return page(request, "forget.html", login, plan=done, texts=_texts(rt, done), applied=True)


def _selection(rt: Runtime, viewer: Viewer, user: str, session: str, first: str, last: str) -> Selection:
    """What to forget, checked: a session the viewer sees (or messages of it), or a whole user
    (the admin only)."""
    owner = viewer.user_id or user.strip()
    if not owner:
        raise PersonRefused("name the user")
    session = session.strip()
    lo, hi = _seq(first, "from"), _seq(last, "to")
    if not session:
        if not viewer.admin:
            raise ReadOnly("only the admin forgets a whole user")
        if lo is not None or hi is not None:
            raise PersonRefused("a range of messages needs a session")
        return Selection(owner)
    if lo is not None and hi is not None and lo > hi:
        raise PersonRefused("the first message is after the last")
    with session_scope(rt.engine) as s:
        found = s.exec(viewer.narrow(select(Session.id), Session, owner).where(Session.external_id == session)).first()
    if found is None:
        raise NotFound(f"no session {session} of user {owner}")
    return Selection(owner, session, lo, hi)


def _seq(raw: str, name: str) -> int | None:
    if not raw.strip():
        return None
    if not raw.strip().isdigit() or int(raw) < 1:
        raise PersonRefused(f"{name} is a message number (1 or more)")
    return int(raw)


def _texts(rt: Runtime, plan: Cascade) -> dict[str, str]:
    """The texts of the memories a forget names (a whole user's, once deleted, are gone)."""
    ids = [*plan.forgotten, *plan.unlinked]
    if not ids:
        return {}
    with session_scope(rt.engine) as s:
        return dict(s.exec(select(Memory.id, Memory.text).where(col(Memory.id).in_(ids))).all())
