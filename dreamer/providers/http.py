"""The generic HTTP provider (``DREAMER_MEMORY_PROVIDER=http``): any memory service that speaks
two JSON calls at `provider_url`, with `provider_token` as a bearer token when set.

* ``POST {url}/search`` with ``{"query", "k", "scope": {"user_id", "agent_id", "project",
  "team"}}`` answers ``{"results": [{"id", "text", "score"}]}``, best first, the scope's only.
* ``POST {url}/turns`` with ``{"turns": [{"scope": {...}, "role", "content"}]}`` stores them and
  answers any 2xx.

Every request names the whole scope (`scope_json`: the user and every owner field of
`dreamer.core.scope`, null where unset), and the service must match all of it exactly (a null
only a null): in `external` mode the dreamer's isolation of agents, projects and teams is the
service's filter.

A status that is not 2xx, a body that is not that shape, or no answer within `llm_timeout`
raises `ProviderError`: the guard retries syncs and its breaker decides, as for any provider."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import httpx

from dreamer.core.errors import ConfigError, ProviderError
from dreamer.core.scope import OWNER_FIELDS, Scope
from dreamer.core.settings import Settings
from dreamer.providers.contract import ProviderHit, Turn


def scope_json(scope: Scope) -> dict[str, str | None]:
    """The whole scope: the user and each owner field (agent, project, team), null where unset."""
    return {"user_id": scope.user_id, **{f: getattr(scope, f) for f in OWNER_FIELDS}}


def hits_of(body: Any) -> list[ProviderHit]:
    """The hits of a search answer; `ProviderError` when it is not ``{"results": [...]}``."""
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list):
        raise ProviderError('the provider\'s search answer has no "results" list')
    try:
        return [ProviderHit(str(r["id"]), str(r["text"]), float(r.get("score") or 0.0)) for r in results]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProviderError(f"a search result is not {{id, text, score}}: {exc!r}") from exc


class HttpProvider:
    """`Provider` over the two calls above, through one `httpx.Client` (handed in, or made from
    the settings)."""

    name = "http"

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def prefetch(self, query: str, scope: Scope, k: int) -> list[ProviderHit]:
        body = self._post("/search", {"query": query, "k": k, "scope": scope_json(scope)})
        return hits_of(body)[:k]

    def sync(self, turns: Sequence[Turn]) -> None:
        rows = [{"scope": scope_json(t.scope), **{k: v for k, v in asdict(t).items() if k != "scope"}} for t in turns]
        self._post("/turns", {"turns": rows})

    def _post(self, path: str, payload: dict[str, Any]) -> Any:
        try:
            r = self.client.post(path.lstrip("/"), json=payload)
        except httpx.HTTPError as exc:
            raise ProviderError(f"{path}: {type(exc).__name__}: {exc}") from exc
        if not r.is_success:
            raise ProviderError(f"{path}: HTTP {r.status_code}")
        try:
            return r.json() if r.content else None
        except ValueError as exc:
            raise ProviderError(f"{path}: the answer is not JSON") from exc

    def close(self) -> None:
        self.client.close()


def create(settings: Settings) -> HttpProvider:
    """The entry point's factory: `ConfigError` when `provider_url` is not an http(s) URL."""
    url = settings.provider_url.strip()
    if not url.startswith(("http://", "https://")):
        raise ConfigError("the http memory provider needs DREAMER_PROVIDER_URL (http:// or https://)")
    headers = {"Authorization": f"Bearer {settings.provider_token}"} if settings.provider_token else {}
    base = url.rstrip("/") + "/"
    return HttpProvider(httpx.Client(base_url=base, headers=headers, timeout=settings.llm_timeout or 30.0))
