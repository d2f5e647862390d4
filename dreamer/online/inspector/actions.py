"""The inspector's actions, each a plain form POST carrying the session's CSRF token: add a
memory; confirm, edit, forget and restore one; accept or reject what waits for review; revert or
accept a run; release a quarantined session; log out. A memory is named by its id or its first
characters (as the CLI prints it). Each answers with a redirect to the page it was sent from
(303), so a reload never sends it twice."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Form, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from dreamer.core.errors import NotAllowedNow, NotFound
from dreamer.engine.records import review
from dreamer.engine.records.revert import accept_run, revert_run
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector import person
from dreamer.online.inspector import queries as q
from dreamer.online.inspector.login import COOKIE, Login, Logins, acting, check_csrf
from dreamer.online.inspector.person import PersonRefused

MAX_TEXT = 4000
MAX_NEW_TEXT = 600  # as an agent's write (`POST /v1/memories`)


def action_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    _memory_actions(router, rt, logins)
    _run_actions(router, rt, logins)

    @router.post("/memories")
    async def add(
        user: str = Form(""),
        text: str = Form(""),
        kind: str = Form("preference"),
        csrf: str = Form(""),
        login: Login = Depends(logins.login),
    ) -> Response:
        acting(login, csrf)
        if len(text) > MAX_NEW_TEXT:
            raise PersonRefused(f"the text is longer than {MAX_NEW_TEXT} characters")
        m = await run_in_threadpool(person.add_memory, rt, login.viewer, user, text, kind)
        return _back(f"/ui/memories/{m.id}")

    @router.post("/sessions/{session_id}/release")
    async def release(session_id: int, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        acting(login, csrf)
        await run_in_threadpool(person.release_session, rt, login.viewer, session_id)
        return _back("/ui/sessions")

    @router.post("/logout")
    def logout(request: Request, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        check_csrf(login, csrf)  # a reader may log out
        logins.close(request.cookies.get(COOKIE, ""))
        out = _back("/ui/login")
        out.delete_cookie(COOKIE, path="/ui")
        return out


def _memory_actions(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.post("/memories/{memory_id}/edit")
    async def edit(
        memory_id: str, text: str = Form(""), csrf: str = Form(""), login: Login = Depends(logins.login)
    ) -> Response:
        acting(login, csrf)
        if len(text) > MAX_TEXT:
            raise PersonRefused(f"the text is longer than {MAX_TEXT} characters")
        m = q.memory_page(rt, login.viewer, memory_id).memory
        if m.status == "pending":  # accepted in these words
            await run_in_threadpool(_reviewed, rt, login, m.id, review.accept, text)
        else:
            await run_in_threadpool(person.edit_memory, rt, login.viewer, m.id, text)
        return _back(f"/ui/memories/{m.id}")

    @router.post("/memories/{memory_id}/confirm")
    async def confirm(memory_id: str, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        acting(login, csrf)
        m = await run_in_threadpool(person.confirm_memory, rt, login.viewer, memory_id)
        return _back(f"/ui/memories/{m.id}")

    @router.post("/memories/{memory_id}/forget")
    async def forget(
        memory_id: str, reason: str = Form(""), csrf: str = Form(""), login: Login = Depends(logins.login)
    ) -> Response:
        acting(login, csrf)
        m = await run_in_threadpool(person.forget_by_hand, rt, login.viewer, memory_id, reason[:MAX_TEXT].strip())
        return _back(f"/ui/memories/{m.id}")

    @router.post("/memories/{memory_id}/restore")
    async def restore(memory_id: str, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        acting(login, csrf)
        m = await run_in_threadpool(person.restore_memory, rt, login.viewer, memory_id)
        return _back(f"/ui/memories/{m.id}")

    @router.post("/memories/{memory_id}/accept")
    async def accept(memory_id: str, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        """A pending memory becomes current; a held one is replaced by its successor (`review.accept`)."""
        acting(login, csrf)
        mid = await run_in_threadpool(_reviewed, rt, login, memory_id, review.accept)
        return _back(f"/ui/memories/{mid}")

    @router.post("/memories/{memory_id}/reject")
    async def reject(memory_id: str, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        """A pending memory is rejected (not proposed again); a held one stays, its successor dropped."""
        acting(login, csrf)
        mid = await run_in_threadpool(_reviewed, rt, login, memory_id, review.reject)
        return _back(f"/ui/memories/{mid}")


def _reviewed(rt: Runtime, login: Login, memory_id: str, decide: Any, text: str | None = None) -> str:
    """Accept or reject a memory that waits for review; its full id."""
    m = q.memory_page(rt, login.viewer, memory_id).memory  # NotFound for another user's
    words = {} if text is None else {"text": text}
    try:
        decide(rt.engine, m.id, user_id=m.user_id, actor=login.viewer.actor, **words)
    except NotAllowedNow as exc:
        raise PersonRefused(str(exc)) from exc
    _drain(rt, m.user_id)
    return m.id


def _run_actions(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.post("/runs/{run_id}/revert")
    async def revert(run_id: int, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        acting(login, csrf)
        q.run_page(rt, login.viewer, run_id)  # NotFound for a run the viewer has no part in
        viewer = login.viewer
        done = await run_in_threadpool(
            lambda: revert_run(rt.engine, run_id, user_id=viewer.user_id, actor=viewer.actor)
        )
        if not done.applied and done.conflicts:
            raise PersonRefused(
                f"run {run_id} was not reverted: later changes touched {len(done.conflicts)} of its memories"
            )
        for user in done.users:
            await run_in_threadpool(_drain, rt, user)
        return _back(f"/ui/runs/{run_id}")

    @router.post("/runs/{run_id}/accept")
    async def accept(run_id: int, csrf: str = Form(""), login: Login = Depends(logins.login)) -> Response:
        acting(login, csrf)
        if not q.run_page(rt, login.viewer, run_id).held:
            raise NotFound(f"run {run_id} holds nothing for review")
        viewer = login.viewer
        done = await run_in_threadpool(
            lambda: accept_run(rt.engine, run_id, user_id=viewer.user_id, actor=viewer.actor)
        )
        for user in done.users:
            await run_in_threadpool(_drain, rt, user)
        return _back(f"/ui/runs/{run_id}")


def _drain(rt: Runtime, user_id: str) -> None:
    from dreamer.engine import outbox

    outbox.drain(rt, users=[user_id])


def _back(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)
