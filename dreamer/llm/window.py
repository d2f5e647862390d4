"""A model's context window, as its server tells it: a `context_length` or `max_model_len` in
`/v1/models` (vLLM, LM Studio, OpenRouter-style gateways), llama.cpp's `GET /props`, Ollama's
`POST /api/show`; and the window a context-overflow error names."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

OLLAMA_DEFAULT_CTX = 2_048  # the num_ctx Ollama serves a model with unless told otherwise (its lowest default)
WINDOW_KEYS = ("context_length", "max_model_len", "n_ctx", "context_window", "max_context_length")
_OVERFLOW = (
    re.compile(r"context window of (\d+)", re.I),  # llama-cpp-python
    re.compile(r"maximum context length is (\d+)", re.I),  # OpenAI, vLLM
    re.compile(r"context size[^\d]{0,40}(\d+)", re.I),  # llama.cpp's server
    re.compile(r"n_ctx\W{0,4}(\d+)", re.I),
)


@dataclass(frozen=True)
class Window:
    """The window in tokens (None: the server did not say) and where it was read."""

    tokens: int | None
    source: str


def discover_window(base_url: str, model: str, *, http: httpx.Client, api_key: str | None = None) -> Window:
    """Ask the server at `base_url` for `model`'s window: `/v1/models`, then `/props`, then
    `/api/show`; any error, 404 or answer without a number is "not here"."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    base = base_url.rstrip("/")
    root = base[: -len("/v1")] if base.endswith("/v1") else base
    asks: tuple[tuple[str, Callable[[], int | None]], ...] = (
        ("/v1/models", lambda: _from_models(_get(http, f"{base}/models", headers), model)),
        ("/props", lambda: _from_props(_get(http, f"{root}/props", headers))),
        ("/api/show", lambda: _from_show(_post(http, f"{root}/api/show", {"model": model}, headers))),
    )
    for source, ask in asks:
        tokens = ask()
        if tokens:
            return Window(tokens, source)
    return Window(None, "unknown")


def _get(http: httpx.Client, url: str, headers: dict[str, str]) -> Any:
    try:
        response = http.get(url, headers=headers)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _post(http: httpx.Client, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    try:
        response = http.post(url, json=body, headers=headers)
        return response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None


def _from_models(answer: Any, model: str) -> int | None:
    entries = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(entries, list):
        return None
    mine = [e for e in entries if isinstance(e, dict) and e.get("id") == model]
    for entry in mine or (entries if len(entries) == 1 else []):
        found = _number(entry) or _number(entry.get("meta")) or _number(entry.get("top_provider"))
        if found:
            return found
    return None


def _from_props(answer: Any) -> int | None:
    if not isinstance(answer, dict):
        return None
    return _number(answer.get("default_generation_settings")) or _number(answer)


def _from_show(answer: Any) -> int | None:
    """Ollama's window: `num_ctx` in the model's parameters when set; else Ollama's default, not
    the model's trained length, which Ollama does not use and cuts prompts to its own without a
    word."""
    if not isinstance(answer, dict):
        return None
    parameters = answer.get("parameters")
    if isinstance(parameters, str) and (m := re.search(r"num_ctx\s+(\d+)", parameters)):
        return int(m.group(1))
    if isinstance(answer.get("model_info"), dict):
        return OLLAMA_DEFAULT_CTX  # the model's own length is not what Ollama serves it with
    return None


def _number(obj: Any) -> int | None:
    if not isinstance(obj, dict):
        return None
    for key in WINDOW_KEYS:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def window_from_error(message: str) -> int | None:
    """The window a server's context-overflow error names, if it names one."""
    for pattern in _OVERFLOW:
        if m := pattern.search(message):
            return int(m.group(1))
    return None


PROBE_WORDS = 33_000  # about as many tokens in any tokenizer: over every window up to 32k
PROBE_SECONDS = 60.0  # a refusal comes at once; a server that reads the whole prompt is given this long
SAFE_WINDOW = 8_192  # what a probe that learnt no number leaves the client with


def probe_window(
    http: httpx.Client, base_url: str, model: str, api_key: str | None = None, *, seconds: float = PROBE_SECONDS
) -> Window:
    """Ask a server that tells no window by sending a prompt longer than most windows, with a
    reply of one token: a server whose window is smaller refuses it at once and names its window
    (llama-cpp-python, vLLM, llama.cpp). One that takes the prompt (a large window, or a server
    that silently cuts what does not fit) or does not answer in `PROBE_SECONDS` is given
    `SAFE_WINDOW`, so the answer is remembered and the probe is not sent again. Only for a local
    endpoint, whose prompt tokens cost nothing."""
    body = {
        "model": model,
        "max_tokens": 1,
        "messages": [{"role": "user", "content": "hello " * PROBE_WORDS}],
    }
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/chat/completions"
    try:
        response = http.post(url, json=body, headers=headers, timeout=seconds)
    except httpx.TimeoutException:
        return Window(SAFE_WINDOW, "overflow probe (no answer in time)")
    except httpx.HTTPError:
        return Window(None, "unknown")  # no server there now: nothing learnt, nothing remembered
    if response.status_code == 200:
        return Window(SAFE_WINDOW, "overflow probe (taken)")
    tokens = window_from_error(response.text) if response.status_code in (400, 413, 422) else None
    return Window(tokens, "overflow probe" if tokens else "unknown")
