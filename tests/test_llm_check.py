"""`dreamer llm check` and `dreamer status` against the scripted server, as a user runs them."""

from __future__ import annotations

import json
import socket

import pytest
from clikit import assert_one_error_line, run
from dreamkit import extraction_script

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


def test_an_unknown_model_is_one_line_and_exit_1(tmp_path, server):
    body = {
        "error": {
            "message": "The model `gpt-9` does not exist",
            "type": "invalid_request_error",
            "code": "model_not_found",
        }
    }
    server.push(Reply.error(404, body=body))
    proc = run(tmp_path, "llm", "check", env=env_of(server, DREAMER_LLM_MODEL="gpt-9"))
    assert_one_error_line(proc)
    assert "HTTP 404: The model `gpt-9` does not exist" in proc.stderr
