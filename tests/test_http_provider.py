"""The generic HTTP provider against a memory service that speaks its two calls over real HTTP
(a small Starlette app served by uvicorn): scoped search and batched turns, the bearer token,
answers out of contract refused with one clear error, and recall in `external` mode labelled."""

from __future__ import annotations

import httpx
import pytest
from modeskit import modes_api
from onlinekit import ALICE_WRITER, LiveServer, bearer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from dreamer.core.errors import ConfigError, ProviderError
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.providers.contract import Turn
from dreamer.providers.http import create
from dreamer.providers.registry import load_provider, provider_names

TOKEN = "service-token-0123456789"
LISBON = "The user is working on a talk for the Lisbon conference in May."


class Service:
    """Turns kept per scope; a search returns the scope's turns sharing a word with the query."""

    def __init__(self) -> None:
        self.turns: list[dict] = []
        self.searches: list[dict] = []  # each search's body, as sent
        self.answer: dict | None = None  # a fixed answer to every search, when set

    def app(self) -> Starlette:
        async def search(request: Request) -> JSONResponse:
            if request.headers.get("authorization") != f"Bearer {TOKEN}":
                return JSONResponse({"error": "no"}, status_code=401)
            body = await request.json()
            self.searches.append(body)
            if self.answer is not None:
                return JSONResponse(self.answer)
            words = set(body["query"].lower().split())
            mine = [(i, t) for i, t in enumerate(self.turns) if t["scope"] == body["scope"]]
            scored = [(len(words & set(t["content"].lower().split())) / len(words), i, t) for i, t in mine]
            found = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[: body["k"]]
            return JSONResponse({"results": [{"id": f"t{i}", "text": t["content"], "score": s} for s, i, t in found]})

        async def turns(request: Request) -> JSONResponse:
            self.turns += (await request.json())["turns"]
            return JSONResponse({"stored": True})

        return Starlette(
            routes=[Route("/mem/search", search, methods=["POST"]), Route("/mem/turns", turns, methods=["POST"])]
        )


@pytest.fixture
def service():
    found = Service()
    with LiveServer(found.app()) as server:
        found.url = f"{server.url}/mem"
        yield found


def settings_for(service: Service, tmp_path, **more) -> Settings:
    values = {"data_dir": tmp_path, "provider_url": service.url, "provider_token": TOKEN, **more}
    return Settings(_env_file=None, **values)


def test_turns_are_kept_by_scope_and_found_only_in_it(service, tmp_path):
    provider = load_provider("http", settings_for(service, tmp_path))
    alice, bob = Scope("alice"), Scope("bob")
    provider.sync([Turn(alice, "user", LISBON), Turn(alice, "user", "I like jazz."), Turn(bob, "user", "Lisbon again")])
    assert service.turns[0] == {
        "scope": {"user_id": "alice", "agent_id": None, "project": None, "team": None},
        "role": "user",
        "content": LISBON,
    }
    hits = provider.prefetch("Lisbon conference", alice, 5)
    assert [(h.id, h.text, h.score) for h in hits] == [("t0", LISBON, 1.0)]
    assert [h.text for h in provider.prefetch("lisbon", bob, 5)] == ["Lisbon again"]
    assert provider.prefetch("opera", alice, 5) == []
    assert "http" in provider_names() and provider.name == "http"
    provider.close()


def test_every_request_names_the_whole_scope(service, tmp_path):
    provider = load_provider("http", settings_for(service, tmp_path))
    whole = Scope("alice", agent_id="coder", project="shop-web", team="red")
    provider.sync([Turn(whole, "user", LISBON)])
    named = {"user_id": "alice", "agent_id": "coder", "project": "shop-web", "team": "red"}
    assert service.turns == [{"scope": named, "role": "user", "content": LISBON}]
    assert [h.text for h in provider.prefetch("Lisbon", whole, 3)] == [LISBON]
    assert provider.prefetch("Lisbon", Scope("alice", agent_id="coder"), 3) == []  # the service matches all of it
    assert [b["scope"] for b in service.searches] == [
        named,
        {"user_id": "alice", "agent_id": "coder", "project": None, "team": None},
    ]
    provider.close()


def test_a_refusal_or_an_answer_out_of_contract_is_a_provider_error(service, tmp_path):
    wrong = create(settings_for(service, tmp_path, provider_token="wrong-token"))
    with pytest.raises(ProviderError, match=r"^/search: HTTP 401$"):
        wrong.prefetch("x", Scope("alice"), 3)
    provider = create(settings_for(service, tmp_path))
    service.answer = {"memories": []}
    with pytest.raises(ProviderError, match='no "results" list'):
        provider.prefetch("x", Scope("alice"), 3)
    service.answer = {"results": [{"text": "no id"}]}
    with pytest.raises(ProviderError, match="is not {id, text, score}"):
        provider.prefetch("x", Scope("alice"), 3)
    down = create(settings_for(service, tmp_path, provider_url="http://127.0.0.1:9/mem"))
    with pytest.raises(ProviderError, match="^/turns: ConnectError"):
        down.sync([Turn(Scope("alice"), "user", "hi")])
    for p in (wrong, provider, down):
        p.close()


def test_no_url_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="needs DREAMER_PROVIDER_URL"):
        create(Settings(_env_file=None, data_dir=tmp_path))


def test_external_mode_recalls_from_the_http_provider_labelled(service, tmp_path):
    more = {"memory_provider": "http", "provider_url": service.url, "provider_token": TOKEN}
    with modes_api(tmp_path, "external", **more) as m:
        r = httpx.post(
            f"{m.url}/v1/sessions/s1/messages",
            json={"messages": [{"role": "user", "content": LISBON}]},
            headers=bearer(ALICE_WRITER),
            timeout=60,
        )
        assert (r.status_code, r.json()["synced"]) == (200, 1)
        m.rt.provider.drained()
        found = httpx.post(
            f"{m.url}/v1/recall", json={"query": "Lisbon conference", "k": 5}, headers=bearer(ALICE_WRITER), timeout=60
        ).json()
        assert [(h["source"], h["text"], h["memory_id"]) for h in found["hits"]] == [("http", LISBON, "http:t0")]
        assert m.rt.provider.state == "closed"
