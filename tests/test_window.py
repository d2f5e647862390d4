"""Where a server tells its window, read from the scripted server's ways and from error texts."""

from __future__ import annotations

import httpx
import pytest

from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.llm.window import Window, discover_window, probe_window, window_from_error


@pytest.mark.parametrize(
    "source,expected",
    [("models", Window(4096, "/v1/models")), ("props", Window(4096, "/props")), ("ollama", Window(4096, "/api/show"))],
)
def test_the_window_is_read_where_the_server_tells_it(source, expected):
    with ScriptedServer(context_window=4096, window_source=source) as srv, httpx.Client(timeout=5) as http:
        assert discover_window(srv.url, "scripted", http=http) == expected


def test_a_server_that_tells_nothing_gives_unknown_and_the_probe_reads_its_overflow_error():
    with ScriptedServer(context_window=2048, window_source=None) as srv, httpx.Client(timeout=5) as http:
        assert discover_window(srv.url, "scripted", http=http) == Window(None, "unknown")
        assert probe_window(http, srv.url, "scripted") == Window(2048, "overflow probe")
        assert [r["body"]["max_tokens"] for r in srv.requests if r["path"].endswith("/chat/completions")] == [1]


def test_a_server_that_takes_the_probe_or_never_answers_it_gets_the_safe_window():
    """A large window, or a server that cuts what does not fit: either way 8192 is safe, and an
    answer is remembered, so the probe is not sent again."""
    with ScriptedServer(context_window=None, window_source=None) as srv, httpx.Client(timeout=5) as http:
        assert probe_window(http, srv.url, "scripted") == Window(8_192, "overflow probe (taken)")
        srv.push(Reply.delay(2.0))
        assert probe_window(http, srv.url, "scripted", seconds=0.3) == Window(
            8_192, "overflow probe (no answer in time)"
        )


def test_ollama_without_num_ctx_is_its_default_not_the_models_trained_length():
    from dreamer.llm.window import _from_show

    trained = {"model_info": {"general.architecture": "llama", "llama.context_length": 131_072}, "parameters": ""}
    assert _from_show(trained) == 2_048
    assert _from_show({**trained, "parameters": "num_ctx 16384\nstop <|eot|>"}) == 16_384


def test_no_server_at_all_is_unknown():
    with httpx.Client(timeout=1) as http:
        assert discover_window("http://127.0.0.1:9/v1", "m", http=http) == Window(None, "unknown")
        assert probe_window(http, "http://127.0.0.1:9/v1", "m") == Window(None, "unknown")


@pytest.mark.parametrize(
    "text,window",
    [
        ("Requested tokens (5000) exceed context window of 2048", 2048),
        ("This model's maximum context length is 4096 tokens. However, you requested 4232 tokens", 4096),
        ("the request exceeds the available context size, try increasing it: n_ctx 8192", 8192),
        ("model not found", None),
    ],
)
def test_the_window_an_overflow_error_names(text, window):
    assert window_from_error(text) == window
