"""Logins of the inspector (`/ui`): a token typed into a form (an API token: that user's own
scope; the admin token: every user) opens a session kept in this process, named by a random id
in an HttpOnly, SameSite=Strict cookie. Every form carries the session's CSRF token, checked on
each POST; a request without the cookie goes to the login page, a POST with a wrong token is 403."""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass

from fastapi import HTTPException, Request

from dreamer.online.auth import Auth
from dreamer.online.inspector.person import ReadOnly, Viewer

COOKIE = "dreamer_ui"


class LoginRequired(Exception):
    """The request has no live inspector login: the page sends it to the login form."""


@dataclass(frozen=True)
class Login:
    viewer: Viewer
    csrf: str
    expires: float  # time.monotonic()

    @property
    def who(self) -> str:
        if self.viewer.user_id is None:
            return "admin"
        return self.viewer.user_id + (f" / {self.viewer.agent_id}" if self.viewer.agent_id else "")


class Logins:
    """The live logins of this process, by session id."""

    def __init__(self, auth: Auth, admin_token: str, minutes: int) -> None:
        self.auth, self.admin_token, self.seconds = auth, admin_token, minutes * 60
        self._by_id: dict[str, Login] = {}
        self._lock = threading.Lock()

    def open(self, token: str) -> str | None:
        """A new session id for a known token, or None."""
        viewer = self._viewer(token.strip())
        if viewer is None:
            return None
        sid = secrets.token_urlsafe(32)
        with self._lock:
            now = time.monotonic()
            self._by_id = {k: v for k, v in self._by_id.items() if v.expires > now}
            self._by_id[sid] = Login(viewer, secrets.token_urlsafe(32), now + self.seconds)
        return sid

    def close(self, sid: str) -> None:
        with self._lock:
            self._by_id.pop(sid, None)

    def login(self, request: Request) -> Login:
        """The request's login (a page dependency); `LoginRequired` without a live one."""
        sid = request.cookies.get(COOKIE, "")
        with self._lock:
            found = self._by_id.get(sid)
        if found is None or found.expires <= time.monotonic():
            raise LoginRequired
        return found

    def _viewer(self, token: str) -> Viewer | None:
        if not token:
            return None
        if self.admin_token and hmac.compare_digest(self.admin_token.encode(), token.encode()):
            return Viewer(user_id=None)
        grant = self.auth.resolve(f"Bearer {token}")
        if grant is None:
            return None
        return Viewer(user_id=grant.user_id, agent_id=grant.agent_id, writer=grant.can_write, name=grant.name)


def check_csrf(login: Login, sent: str | None) -> None:
    """403 unless the form's CSRF token is the session's."""
    if not sent or not hmac.compare_digest(login.csrf.encode(), sent.encode()):
        raise HTTPException(403, "the form's CSRF token is missing or wrong")


def acting(login: Login, csrf: str | None) -> None:
    """The form's CSRF token is the session's, and the login may change things (403 for a reader)."""
    check_csrf(login, csrf)
    if not login.viewer.writer:
        raise ReadOnly("this login may only look: log in with a writer token to change anything")
