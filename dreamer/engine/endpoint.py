"""The model client a process builds once: the structured-output mode remembered for the
endpoint and model, the context window asked of the server (or set), the request timeout learnt
by `dreamer llm check`; a newly found mode is remembered in the store for the next process."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from sqlalchemy.engine import Engine

from dreamer.core.models import LLMEndpoint
from dreamer.core.settings import Settings
from dreamer.llm.client import DEFAULT_WINDOW, REMOTE_TIMEOUT, OpenAILLM, build_llm, is_local
from dreamer.llm.formats import OutputMode, as_mode
from dreamer.llm.window import Window, discover_window, probe_window
from dreamer.store import endpoints

log = logging.getLogger(__name__)

PROBE_TIMEOUT = 5.0  # seconds each question about the window may take


@dataclass(frozen=True)
class Known:
    """What a process starts with for its endpoint: the output mode, the window and where it came from."""

    output_mode: OutputMode | None
    window: int
    source: str
    timeout: float | None


def known_endpoint(settings: Settings, engine: Engine, *, ask: bool = True) -> Known:
    """The mode to start with (forced by a setting, else remembered), the window (set; else told
    by the server when `ask`; else remembered; else, for a local server, probed by overflow; else
    `DEFAULT_WINDOW`) and the timeout learnt by `llm check`."""
    url, model = settings.llm_base_url, settings.llm_model
    record = endpoints.learnt(engine, url, model)
    output_mode = as_mode(settings.llm_output_mode) or (as_mode(record.mode) if record else None)
    window = _window(settings, ask, record)
    if window.tokens is not None and window.source not in ("setting", "remembered"):
        endpoints.remember(engine, url, model, context_window=window.tokens, window_source=window.source)
    tokens = window.tokens or DEFAULT_WINDOW
    learnt = learnt_timeout(record.checked_seconds, record.checked_tokens, tokens) if record else None
    return Known(output_mode, tokens, window.source if window.tokens else "default", learnt)


def _window(settings: Settings, ask: bool, record: LLMEndpoint | None) -> Window:
    if settings.llm_context_window:
        return Window(settings.llm_context_window, "setting")
    url, model, key = settings.llm_base_url, settings.llm_model, settings.llm_api_key
    with httpx.Client(timeout=PROBE_TIMEOUT) as http:
        told = discover_window(url, model, http=http, api_key=key) if ask else Window(None, "unknown")
        if told.tokens is not None:
            return told
        if record is not None and record.context_window:
            return Window(record.context_window, "remembered")
        return probe_window(http, url, model, key) if ask and is_local(url) else told


def learnt_timeout(seconds: float | None, tokens: int | None, window: int) -> float | None:
    """A request timeout from `llm check`'s extraction (`tokens` read and written in `seconds`):
    three times what a request filling the whole window would take at that speed, never under
    the remote default; None if nothing was measured."""
    if not seconds or not tokens:
        return None
    return max(REMOTE_TIMEOUT, round(3 * seconds * max(1.0, window / tokens)))


def open_llm(settings: Settings, engine: Engine, known: Known | None = None) -> OpenAILLM | None:
    """The process's model client, or None without an endpoint; `known` when already asked."""
    if not settings.llm_base_url:
        return None
    known = known or known_endpoint(settings, engine)

    def remember_mode(output_mode: OutputMode) -> None:
        log.info("%s at %s answers in the %s output mode", settings.llm_model, settings.llm_base_url, output_mode)
        endpoints.remember(engine, settings.llm_base_url, settings.llm_model, mode=output_mode)

    return build_llm(
        settings,
        output_mode=known.output_mode,
        context_window=known.window,
        timeout=known.timeout,
        on_mode=remember_mode,
    )
