"""`dreamer llm check` and `dreamer status` against the scripted server, as a user runs them."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from clikit import assert_one_error_line, run
from dreamkit import extraction_script

from dreamer.engine.llm_check import model_problem
from dreamer.llm.scripted.server import Reply, ScriptedServer

ITEM = {"text": "The user is vegetarian.", "seqs": [1], "importance": 0.7}


def answer(body: dict) -> Reply:
    return Reply.json({"profile": [ITEM]})


@pytest.fixture
def server():
    with ScriptedServer(answer) as srv:
        yield srv


def env_of(server: ScriptedServer, **more: str) -> dict[str, str]:
    return {"DREAMER_LLM_BASE_URL": server.url, "DREAMER_LLM_MODEL": "scripted", **more}


def formats(server: ScriptedServer) -> list[object]:
    return [(b.get("response_format") or {}).get("type") for b in server.chat_requests()]


def test_check_names_the_mode_the_window_and_the_usage(tmp_path, server):
    proc = run(tmp_path, "llm", "check", "--json", env=env_of(server))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    [usage] = [r["usage"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert (report["mode"], report["model"], report["base_url"]) == ("json_schema", "scripted", server.url)
    assert (report["window"], report["window_source"]) == (128_000, "/v1/models")
    assert report["candidates"] == ["The user is vegetarian."]
    assert (report["prompt_tokens"], report["completion_tokens"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert report["problem"] is None and report["seconds"] > 0
    assert report["timeout"] >= 60.0  # learnt from the measured speed, never under the remote default


def test_the_mode_found_is_remembered_for_the_next_process(tmp_path):
    with ScriptedServer(answer, json_schema=False) as srv:
        first = run(tmp_path, "llm", "check", env=env_of(srv))
        assert first.returncode == 0, first.stderr
        assert "output mode      json_object_schema" in first.stdout
        assert formats(srv) == ["json_schema", "json_object"]
        chat = tmp_path / "chat.jsonl"
        chat.write_text(json.dumps({"role": "user", "content": "I'm vegetarian."}) + "\n")
        assert run(tmp_path, "ingest", str(chat), "--user", "alice").returncode == 0
        dreamed = run(tmp_path, "dream", "--force", env=env_of(srv, DREAMER_MIN_ROUNDS="1"))
        assert dreamed.returncode == 0, dreamed.stderr
        assert formats(srv) == ["json_schema", "json_object", "json_object"]  # the pass started where check ended
        again = run(tmp_path, "llm", "check", env=env_of(srv))
        assert again.returncode == 0, again.stderr
        assert formats(srv)[3:] == ["json_schema", "json_object"]  # check negotiates afresh (a server may be upgraded)
        status = run(tmp_path, "status", "--json", env=env_of(srv))
    assert json.loads(status.stdout)["llm_mode"] == "json_object_schema"


def test_a_forced_mode_is_what_status_shows(tmp_path, server):
    assert run(tmp_path, "init").returncode == 0
    proc = run(tmp_path, "status", "--json", env=env_of(server, DREAMER_LLM_OUTPUT_MODE="prompt"))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["llm_mode"] == "prompt (forced by DREAMER_LLM_OUTPUT_MODE)"
    assert shown["llm_window"] == "unknown"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_answer_is_one_line_and_exit_1(tmp_path):
    proc = run(tmp_path, "llm", "check", env={"DREAMER_LLM_BASE_URL": f"http://127.0.0.1:{free_port()}/v1"})
    assert_one_error_line(proc)
    assert "no answer from" in proc.stderr


def test_a_refused_key_is_one_line_and_exit_1(tmp_path, server):
    server.push(Reply.error(401))
    proc = run(tmp_path, "llm", "check", env=env_of(server))
    assert_one_error_line(proc)
    assert "HTTP 401" in proc.stderr


def test_a_window_too_small_is_one_line_and_exit_1(tmp_path, server):
    proc = run(tmp_path, "llm", "check", env=env_of(server, DREAMER_LLM_CONTEXT_WINDOW="900"))
    assert_one_error_line(proc)
    assert "DREAMER_LLM_CONTEXT_WINDOW" in proc.stderr
    assert server.chat_requests() == []


def test_without_an_endpoint_check_says_how_to_set_one(tmp_path):
    proc = run(tmp_path, "llm", "check")
    assert_one_error_line(proc)
    assert "DREAMER_LLM_BASE_URL" in proc.stderr


def test_a_reply_with_nothing_valid_is_a_warning_not_a_failure(tmp_path):
    with ScriptedServer(lambda body: Reply.text("I cannot help with that.")) as srv:
        proc = run(tmp_path, "llm", "check", env=env_of(srv))
    assert proc.returncode == 0, proc.stderr
    assert "warning: the model answered, but nothing valid: no valid answer after one repair" in proc.stdout


def test_a_pass_with_a_scripted_model_still_sends_one_request_per_call(tmp_path):
    """The window is asked of /v1/models, so no chat request is spent on it."""
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps({"role": "user", "content": "I prefer green tea."}) + "\n")
    with ScriptedServer(extraction_script()) as srv:
        assert run(tmp_path, "ingest", str(chat), "--user", "alice").returncode == 0
        proc = run(tmp_path, "dream", "--force", env=env_of(srv, DREAMER_MIN_ROUNDS="1"))
        assert proc.returncode == 0, proc.stderr
        assert len(srv.chat_requests()) == 1


def test_a_model_the_server_does_not_list_is_one_line_and_exit_1(tmp_path, server):
    proc = run(tmp_path, "llm", "check", env=env_of(server, DREAMER_LLM_MODEL="gpt-9"))
    assert_one_error_line(proc)
    assert proc.stderr.strip() == (
        f"error: {server.url}: model 'gpt-9' is not served here; the server lists scripted (set DREAMER_LLM_MODEL)"
    )
    assert server.chat_requests() == []  # nothing sent to a model that is not there


class NotAnLLM(BaseHTTPRequestHandler):
    """A web server on the port that is not a model server: 404 for every page, 501 for POST."""

    posts: list[str] = []

    def do_GET(self) -> None:
        self.send_error(404)

    def do_POST(self) -> None:
        self.posts.append(self.path)
        self.send_error(501)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def web_port():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), NotAnLLM)
    NotAnLLM.posts = []
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd.server_address[1], NotAnLLM.posts
    httpd.shutdown()
    httpd.server_close()


def test_a_port_that_is_no_llm_server_is_one_line_and_exit_1_with_no_probe(tmp_path, web_port):
    port, posts = web_port
    url = f"http://127.0.0.1:{port}/v1"
    proc = run(tmp_path, "llm", "check", env={"DREAMER_LLM_BASE_URL": url, "DREAMER_LLM_MODEL": "any"})
    assert_one_error_line(proc)
    assert proc.stderr.strip() == (
        f"error: {url}: not an OpenAI-compatible server (GET /models answered HTTP 404); "
        "is this the model server's /v1 URL?"
    )
    assert posts == []  # no window probe, no chat request, no retries


@pytest.mark.parametrize(
    ("model", "status", "answer", "problem"),
    [
        ("smollm2", 200, {"data": [{"id": "smollm2"}]}, None),
        ("llama3.2", 200, {"object": "list", "data": [{"id": "llama3.2:latest"}, {"id": "qwen2.5:0.5b"}]}, None),
        (
            "llama3",
            200,
            {"data": [{"id": "llama3.2:latest"}, {"id": "qwen2.5:0.5b"}]},
            "model 'llama3' is not served here; the server lists llama3.2:latest, qwen2.5:0.5b (set DREAMER_LLM_MODEL)",
        ),
        ("m", 200, {"data": []}, "the server lists no model, so 'm' cannot be served"),
        (
            "m",
            200,
            {"status": "ok"},
            "not an OpenAI-compatible server (GET /models answered no model list); is this the model server's /v1 URL?",
        ),
        (
            "m",
            200,
            None,
            "not an OpenAI-compatible server (GET /models answered no model list); is this the model server's /v1 URL?",
        ),
        (
            "m",
            501,
            {"data": [{"id": "m"}]},
            "not an OpenAI-compatible server (GET /models answered HTTP 501); is this the model server's /v1 URL?",
        ),
    ],
)
def test_what_the_model_list_says_of_the_model(model, status, answer, problem):
    assert model_problem(model, status, answer) == problem


def test_the_lines_name_at_most_eight_models():
    listed = {"data": [{"id": f"m{k}"} for k in range(11)]}
    assert model_problem("x", 200, listed) == (
        "model 'x' is not served here; the server lists m0, m1, m2, m3, m4, m5, m6, m7 and 3 more "
        "(set DREAMER_LLM_MODEL)"
    )


def test_each_check_times_a_prompt_no_cache_holds(tmp_path, server):
    """A server that reuses the prefix it read last (llama.cpp) would answer a second check from
    its cache; the timeout learnt from that would be far too short."""
    for _ in range(2):
        assert run(tmp_path, "llm", "check", env=env_of(server)).returncode == 0
    systems = [b["messages"][0]["content"] for b in server.chat_requests()]
    heads = [text.split("\n", 1) for text in systems]
    assert len(heads) == 2 and heads[0][0] != heads[1][0]  # each starts with a line of its own
    assert [head[0].startswith("Check ") for head in heads] == [True, True]
    assert heads[0][1] == heads[1][1]  # and then the card, as a pass sends it
