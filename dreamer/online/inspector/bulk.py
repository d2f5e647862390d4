"""Bulk review: accept, reject or forget the items a person ticked in the review queue, in one
action. Each memory is decided on its own, as one accept, reject or forget would decide it (its
own history event, naming the person); the outbox is drained once per user; the queue then shows
how many were done, and how many could not be (an item another decision settled first)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from dreamer.core.errors import NotAllowedNow
from dreamer.engine import outbox
from dreamer.engine.records import review
from dreamer.engine.runtime import Runtime
from dreamer.online.inspector.login import Login, Logins, acting
from dreamer.online.inspector.person import PersonRefused, Viewer, find_memory, forget_many
from dreamer.store.db import session_scope

MAX_BULK = 500
DECIDE: dict[str, Any] = {"accept": review.accept, "reject": review.reject}
ACTIONS = (*DECIDE, "forget")


@dataclass
class Bulk:
    """What one bulk action did: the memories it decided, and those it could not, with why."""

    action: str
    done: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def bulk_review(rt: Runtime, viewer: Viewer, action: str, memory_ids: list[str]) -> Bulk:
    """Decide every memory of `memory_ids` the same way; NotFound, and nothing decided, when one
    is not the viewer's."""
    if action not in ACTIONS:
        raise PersonRefused(f"unknown action {action!r}: use one of {', '.join(ACTIONS)}")
    ids = list(dict.fromkeys(i.strip() for i in memory_ids if i.strip()))
    if not ids:
        raise PersonRefused(f"tick the items to {action}")
    if len(ids) > MAX_BULK:
        raise PersonRefused(f"at most {MAX_BULK} items at once")
    if action == "forget":
        return Bulk(action, forget_many(rt, viewer, ids, "forgotten in review"))
    with session_scope(rt.engine) as s:
        owned = [(m.id, m.user_id) for m in (find_memory(s, viewer, i) for i in ids)]
    out = Bulk(action)
    for memory_id, owner in owned:
        try:
            DECIDE[action](rt.engine, memory_id, user_id=owner, actor=viewer.actor)
            out.done.append(memory_id)
        except NotAllowedNow as exc:
            out.refused[memory_id] = str(exc)
    for user in sorted({owner for _, owner in owned}):
        outbox.drain(rt, users=[user])  # the index and the Markdown follow
    return out


def bulk_routes(router: APIRouter, rt: Runtime, logins: Logins) -> None:
    @router.post("/review/bulk")
    async def bulk(
        action: str = Form(""),
        ids: list[str] = Form([]),
        user: str = Form(""),
        csrf: str = Form(""),
        login: Login = Depends(logins.login),
    ) -> Response:
        acting(login, csrf)
        done = await run_in_threadpool(bulk_review, rt, login.viewer, action, ids)
        back = {"done": done.action, "n": len(done.done), "refused": len(done.refused)}
        back |= {"user": user.strip()} if user.strip() else {}
        return RedirectResponse(f"/ui/review?{urlencode(back)}", status_code=303)
