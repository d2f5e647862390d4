"""`dreamer llm check`: is the endpoint usable, in which structured-output mode, with which
window; then one extraction of a bundled two-turn example, timed, with the endpoint's own usage,
sent so that no prompt cache can answer it (`Uncached`). What it measures is remembered for the
endpoint (the request timeout is learnt from it)."""

from __future__ import annotations

import secrets
import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import httpx
from pydantic import BaseModel
from sqlalchemy.engine import Engine

from dreamer.core.errors import EndpointUnusable, LLMInvalidOutput
from dreamer.core.settings import Settings
from dreamer.engine.endpoint import PROBE_TIMEOUT, known_endpoint, learnt_timeout, open_llm
from dreamer.engine.extraction.extract import LLMExtractor, check_fits
from dreamer.engine.extraction.transcript import Chunk, Line
from dreamer.llm.client import LLM, M, Usage, request_timeout
from dreamer.llm.formats import as_mode
from dreamer.store import endpoints

EXAMPLE = (
    Line(1, "user", None, "I'm vegetarian, and I moved to Leeds last spring for a job at the university library."),
    Line(2, "assistant", None, "Got it: vegetarian, living in Leeds, working at the university library."),
)


@dataclass
class CheckReport:
    """What `llm check` found."""

    base_url: str
    model: str
    output_mode: str = ""  # `mode` in the JSON
    window: int = 0
    window_source: str = ""
    candidates: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    timeout: float = 0.0
    problem: str | None = None  # the model answered, but nothing valid

    def as_json(self) -> dict[str, Any]:
        """The report as `llm check --json` prints it: its fields in order, the output mode as `mode`."""
        return {"mode" if k == "output_mode" else k: v for k, v in asdict(self).items()}


def check_endpoint(settings: Settings, engine: Engine) -> CheckReport:
    """Check the configured endpoint; `EndpointUnusable` (one clear line) when it cannot be used."""
    report = CheckReport(settings.llm_base_url, settings.llm_model)
    _reachable(settings)
    known = known_endpoint(settings, engine)
    known = replace(known, output_mode=as_mode(settings.llm_output_mode))  # negotiated afresh unless forced
    report.window, report.window_source = known.window, known.source
    llm = open_llm(settings, engine, known)
    if llm is None:
        raise EndpointUnusable("no LLM endpoint: set DREAMER_LLM_BASE_URL")
    extractor = LLMExtractor(Uncached(llm), limit=settings.entries_per_session)
    check_fits(extractor)
    started = time.perf_counter()
    try:
        result = extractor.extract(Chunk(list(EXAMPLE), sessions=1), "agent")
    except LLMInvalidOutput as exc:
        report.problem = str(exc)
        usage = getattr(exc, "usage", None)
        report.prompt_tokens = usage.prompt_tokens if usage else 0
        report.completion_tokens = usage.completion_tokens if usage else 0
    else:
        report.candidates = [c.text for c in result.candidates]
        report.prompt_tokens, report.completion_tokens = result.usage.prompt_tokens, result.usage.completion_tokens
    report.seconds = round(time.perf_counter() - started, 3)
    report.output_mode = llm.output_mode
    _remember(settings, engine, report)
    return report


class Uncached:
    """The endpoint's client with a line of its own at the head of each system prompt, so that no
    prompt cache can serve the timed extraction from what the server read before (llama.cpp
    reuses the longest prefix it holds: a second check then reads almost nothing and the timeout
    learnt from it is far too short)."""

    def __init__(self, llm: LLM) -> None:
        self.llm, self.name = llm, llm.name
        self.mark = f"Check {secrets.token_hex(4)}."

    def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: type[M],
        name: str = "result",
        attempts: int | None = None,
        reply_tokens: int | None = None,
    ) -> tuple[M, Usage]:
        marked = f"{self.mark}\n{system}"
        return self.llm.complete_json(
            system=marked, user=user, schema=schema, name=name, attempts=attempts, reply_tokens=reply_tokens
        )

    def room(self, system: str, schema: type[BaseModel], reply_tokens: int) -> int:
        return self.llm.room(f"{self.mark}\n{system}", schema, reply_tokens)


def _remember(settings: Settings, engine: Engine, report: CheckReport) -> None:
    endpoints.remember(
        engine,
        settings.llm_base_url,
        settings.llm_model,
        mode=report.output_mode,
        checked_seconds=report.seconds,
        checked_tokens=(report.prompt_tokens + report.completion_tokens) or None,
    )
    learnt = learnt_timeout(report.seconds, report.prompt_tokens + report.completion_tokens, report.window)
    report.timeout = request_timeout(settings, learnt)


def _reachable(settings: Settings) -> None:
    """Raise `EndpointUnusable` (one line) when the endpoint does not answer, refuses the key, is
    not an OpenAI-compatible server (no model list at `/models`) or does not list the model;
    asked before any chat request, so nothing is sent to a server that cannot take it."""
    url = settings.llm_base_url.rstrip("/") + "/models"
    headers = {"Authorization": f"Bearer {settings.llm_api_key or 'none'}"}
    try:
        response = httpx.get(url, headers=headers, timeout=PROBE_TIMEOUT)
    except httpx.HTTPError as exc:
        raise EndpointUnusable(f"no answer from {settings.llm_base_url}: {type(exc).__name__}: {exc}") from exc
    if response.status_code in (401, 403):
        raise EndpointUnusable(
            f"{settings.llm_base_url} refused the API key (HTTP {response.status_code}): set DREAMER_LLM_API_KEY"
        )
    problem = model_problem(settings.llm_model, response.status_code, _json_of(response))
    if problem is not None:
        raise EndpointUnusable(f"{settings.llm_base_url}: {problem}")


def _json_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


LISTED = 8  # models named in the line that says the configured one is not listed


def model_problem(model: str, status: int, answer: Any) -> str | None:
    """What is wrong with the answer to `GET /models` for `model`, in one phrase; None when the
    server lists it. An OpenAI-compatible server answers 200 with ``{"data": [{"id": ...}, ...]}``;
    a model listed as ``name:latest`` (Ollama) is also found as ``name``."""
    entries = answer.get("data") if isinstance(answer, dict) else None
    if status != 200 or not isinstance(entries, list):
        said = f"HTTP {status}" if status != 200 else "no model list"
        return f"not an OpenAI-compatible server (GET /models answered {said}); is this the model server's /v1 URL?"
    ids = [str(e["id"]) for e in entries if isinstance(e, dict) and e.get("id")]
    if model in ids or f"{model}:latest" in ids:
        return None
    if not ids:
        return f"the server lists no model, so {model!r} cannot be served"
    shown = ", ".join(ids[:LISTED]) + (f" and {len(ids) - LISTED} more" if len(ids) > LISTED else "")
    return f"model {model!r} is not served here; the server lists {shown} (set DREAMER_LLM_MODEL)"


def check_model_fits(settings: Settings, engine: Engine) -> None:
    """At a daemon's start: `WindowTooSmall` (one clear line) when the configured model's window
    cannot hold an extraction card, rather than a failed pass every interval."""
    llm = open_llm(settings, engine)
    if llm is not None:
        check_fits(LLMExtractor(llm, limit=settings.entries_per_session))
