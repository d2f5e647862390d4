"""Bearer tokens of the HTTP API: the grants in `api_tokens`, each bound to a scope and a role,
and the request dependencies that resolve them."""

from __future__ import annotations

import getpass
import hmac
import json
from typing import Annotated, Literal

from fastapi import HTTPException, Request
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from dreamer.core.errors import ConfigError, json_reason, validation_summary
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.online.schemas import GrantId

MIN_TOKEN_CHARS = 16
INSECURE_TOKEN = "insecure-single-user-mode"  # never compared: in that mode every request is the user's


def token_problem(token: str) -> str | None:
    """Why a configured token could never match the one a request sends, or None. A header
    value carries no surrounding space and (in practice) ASCII only, so such a token would
    answer every request 401 while the server looks healthy."""
    if not token.strip():
        return "is only whitespace"
    if token != token.strip():
        return "has whitespace before or after it"
    if not token.isascii():
        return "has characters outside ASCII"
    if not token.isprintable():
        return "has control characters"
    return None


def _sendable(token: str) -> str:
    if problem := token_problem(token):
        raise ValueError(problem)
    return token


Token = Annotated[str, Field(min_length=MIN_TOKEN_CHARS), AfterValidator(_sendable)]


class Grant(BaseModel):
    """One bearer token, bound to a scope and a role."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    token: Token
    user_id: GrantId
    agent_id: GrantId | None = None
    team: GrantId | None = None
    role: Literal["writer", "reader"]
    name: GrantId | None = None  # who holds it, as the inspector's history names them

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
    except json.JSONDecodeError as exc:
        raise ConfigError("api_tokens is not valid JSON: " + json_reason(exc, f"position {exc.pos}")) from exc
    if not isinstance(data, list):
        raise ConfigError("api_tokens must be a JSON list of {token, user_id, agent_id?, team?, role, name?} objects")
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

    def grant(self, request: Request) -> Grant:
        """The request's grant (a route dependency); 401 without a known bearer token."""
        found = self.resolve(request.headers.get("authorization"))
        if found is None:
            raise HTTPException(401, "missing or unknown bearer token", headers={"WWW-Authenticate": "Bearer"})
        return found

    def writer(self, request: Request) -> Grant:
        """The request's grant when it may write (a route dependency); 403 for a reader."""
        g = self.grant(request)
        if not g.can_write:
            raise HTTPException(403, "this token may only read")
        return g


LOCAL_TOKEN = "local-agent-on-this-machine"  # never compared: a local command acts as its one grant


def local_grant(
    settings: Settings,
    *,
    user: str | None = None,
    agent: str | None = None,
    team: str | None = None,
    read_only: bool = False,
) -> Grant:
    """The grant of a local agent command (`dreamer mcp` over stdio, `dreamer hook`): its flags
    first, then the `local_*` settings; the user is the OS login name when neither names one."""
    try:
        return Grant(
            token=LOCAL_TOKEN,
            user_id=user or settings.local_user or _login_name(),
            agent_id=agent or settings.local_agent or None,
            team=team or settings.local_team or None,
            role="reader" if read_only else settings.local_role,
        )
    except ValidationError as exc:
        raise ConfigError(f"local scope: {validation_summary(exc)}") from exc


def _login_name() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError) as exc:  # no name for this uid (a bare container)
        raise ConfigError("no user for local commands: set DREAMER_LOCAL_USER or pass --user") from exc
