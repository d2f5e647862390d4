"""Structured-output negotiation, reply budgets and window fitting, over real HTTP to the
scripted server with the real openai client."""

from __future__ import annotations

import json
import math

import openai
import pytest
from pydantic import BaseModel

from dreamer.core.errors import LLMError, LLMInvalidOutput, WindowTooSmall
from dreamer.llm.bill import prompt_tokens_of
from dreamer.llm.client import OpenAILLM
from dreamer.llm.formats import OUTPUT_MODES, next_mode, rejects_format
from dreamer.llm.guard import GuardedLLM
from dreamer.llm.scripted.server import Reply, ScriptedServer

SYSTEM = "Extract durable facts about the user."
USER = "I always use tabs, never spaces."
VALID = {"facts": ["prefers tabs"]}

# What llama-cpp-python 0.3.36 answers to a json_schema response_format (HTTP 500).
LLAMA_CPP_PYTHON_500 = {
    "error": {
        "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}
VLLM_422 = {"detail": [{"type": "value_error", "loc": ["body", "response_format"], "msg": "unsupported type"}]}
GATEWAY_400 = {"error": {"message": "Unknown parameter: json_object.schema", "type": "invalid_request_error"}}
OVERFLOW_400 = {
    "error": {
        "message": "This model's maximum context length is 2048 tokens. However, you requested 2300 tokens "
        "(2299 in the messages, 1 in the completion). Please reduce the length of the messages or completion.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}


class Facts(BaseModel):
    facts: list[str]


@pytest.fixture
def server():
    with ScriptedServer() as srv:
        yield srv


def make_llm(server: ScriptedServer, **kwargs) -> OpenAILLM:
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0, timeout=5.0)
    return OpenAILLM(client, model="m", sleep=lambda _: None, rand=lambda: 0.5, **kwargs)


def ask(llm, **kwargs):
    return llm.complete_json(system=SYSTEM, user=USER, schema=Facts, name="facts", **kwargs)


def formats(server: ScriptedServer) -> list[object]:
    return [(b.get("response_format") or {}).get("type") for b in server.chat_requests()]


def test_modes_are_tried_in_order():
    assert OUTPUT_MODES == ("json_schema", "json_object_schema", "json_object", "prompt")
    assert [next_mode(m) for m in OUTPUT_MODES] == ["json_object_schema", "json_object", "prompt", None]


@pytest.mark.parametrize(
    "status,body",
    [(500, LLAMA_CPP_PYTHON_500), (422, VLLM_422), (400, {"error": {"message": "x", "param": "response_format"}})],
)
def test_a_refused_format_in_any_status_switches_at_once_without_a_retry(server, status, body):
    learnt: list[str] = []
    server.push(Reply.error(status, body=body), Reply.json(VALID))
    llm = make_llm(server, on_mode=learnt.append)
    result, usage = ask(llm)
    assert result == Facts(**VALID)
    assert formats(server) == ["json_schema", "json_object"]
    assert server.chat_requests()[1]["response_format"]["schema"]["required"] == ["facts"]
    assert (llm.output_mode, learnt, usage.requests) == ("json_object_schema", ["json_object_schema"], 2)


def test_each_refusal_moves_one_mode_on_down_to_no_response_format(server):
    server.push(Reply.error(500, body=LLAMA_CPP_PYTHON_500), Reply.error(400, body=GATEWAY_400))
    server.push(Reply.error(400, body={"error": {"message": "response_format is not supported"}}), Reply.json(VALID))
    llm = make_llm(server)
    assert ask(llm)[0] == Facts(**VALID)
    assert formats(server) == ["json_schema", "json_object", "json_object", None]
    last = server.chat_requests()[-1]
    assert "response_format" not in last
    assert '"required":["facts"]' in last["messages"][0]["content"]  # the schema is in the card
    assert llm.output_mode == "prompt"


def test_a_refusal_never_counts_toward_the_breaker(server):
    server.push(Reply.error(500, body=LLAMA_CPP_PYTHON_500), Reply.json(VALID))
    guard = GuardedLLM(make_llm(server), token_budget=100_000, breaker_threshold=1)
    ask(guard)
    assert (guard.breaker.failures, guard.breaker.refusing()) == (0, False)


def test_a_plain_500_is_still_a_fault_retried(server):
    server.push(Reply.error(500), Reply.json(VALID))
    llm = make_llm(server)
    ask(llm)
    assert formats(server) == ["json_schema", "json_schema"]
    assert llm.output_mode == "json_schema"


def test_a_forced_mode_is_never_switched(server):
    server.push(Reply.error(500, body=LLAMA_CPP_PYTHON_500))
    with pytest.raises(LLMError, match="HTTP 500"):
        ask(make_llm(server, output_mode="json_schema", forced=True, max_retries=0))
    assert formats(server) == ["json_schema"]


def test_a_remembered_mode_is_where_the_client_starts(server):
    server.push(Reply.json(VALID))
    ask(make_llm(server, output_mode="json_object"))
    assert server.chat_requests()[0]["response_format"] == {"type": "json_object"}


def test_rejects_format_reads_the_error_text_only_for_capability_statuses():
    request = openai.OpenAI(api_key="x").chat.completions  # never called: only builds errors below
    del request
    import httpx

    def err(status: int, body: object) -> openai.APIStatusError:
        response = httpx.Response(status, json=body, request=httpx.Request("POST", "http://x/v1/chat/completions"))
        return openai.APIStatusError("Error code", response=response, body=body)

    assert rejects_format(err(500, LLAMA_CPP_PYTHON_500))
    assert rejects_format(err(422, VLLM_422))
    assert not rejects_format(err(500, {"error": {"message": "out of memory"}}))
    assert not rejects_format(err(429, {"error": {"message": "response_format rate"}}))


# --- reply budgets and the window -----------------------------------------------------


def test_every_request_sets_max_tokens_from_its_reply_budget(server):
    server.push(Reply.json(VALID), Reply.json(VALID))
    llm = make_llm(server, context_window=100_000, reply_tokens=4_096)
    ask(llm, reply_tokens=300)
    ask(llm)
    assert [b["max_tokens"] for b in server.chat_requests()] == [300, 4_096]


def test_the_budget_shrinks_to_what_the_window_leaves(server):
    server.push(Reply.json(VALID))
    llm = make_llm(server, context_window=300, reply_tokens=4_096)
    ask(llm)
    body = server.chat_requests()[0]
    assert body["max_tokens"] == 300 - math.ceil(prompt_tokens_of(body) * 1.2)


def test_a_small_window_gives_the_reply_a_quarter_of_it(server):
    server.push(Reply.json(VALID))
    ask(make_llm(server, context_window=2_048, reply_tokens=4_096))
    assert server.chat_requests()[0]["max_tokens"] == 512


def test_a_prompt_that_leaves_no_room_is_not_sent(server):
    with pytest.raises(WindowTooSmall, match="window of 100 tokens"):
        ask(make_llm(server, context_window=100))
    assert server.chat_requests() == []


def test_a_window_named_by_an_overflow_error_is_taken(server):
    server.push(Reply.error(400, body=OVERFLOW_400), Reply.json(VALID))
    llm = make_llm(server, context_window=8_192, reply_tokens=4_096)
    ask(llm)
    first, second = server.chat_requests()
    assert llm.context_window == 2_048
    assert (first["max_tokens"], second["max_tokens"]) == (2_048, 512)


def test_room_is_the_window_less_card_schema_reply_and_margin(server):
    llm = make_llm(server, context_window=2_048)
    fixed = math.ceil(prompt_tokens_of(llm._body(SYSTEM, "", Facts, "result", [])) * 1.2)
    assert llm.room(SYSTEM, Facts, 500) == math.floor((2_048 - fixed - 500) / 1.2)


def test_the_margin_follows_the_endpoints_own_count(server):
    body_tokens = prompt_tokens_of(make_llm(server)._body(SYSTEM, USER, Facts, "facts", []))
    server.push(Reply.json(VALID).with_usage(body_tokens * 2, 3))
    llm = make_llm(server)
    ask(llm)
    assert llm.margin == 1.5  # at most half again: past that the figure is a server's own, not a tokenizer's


# --- weak replies through the client --------------------------------------------------------


def test_a_reply_cut_at_its_budget_is_read_up_to_its_last_item(server):
    full = json.dumps({"facts": ["prefers tabs", "never spaces", "uses vim"]})
    server.push(Reply(content=full[: full.index("uses")], finish_reason="length"))
    result, usage = ask(make_llm(server))
    assert result == Facts(facts=["prefers tabs", "never spaces"])
    assert usage.notes == ["reply cut at its budget of 2048 tokens: read up to its last complete item"]
    assert usage.dropped == []  # a note, not a dropped item
    assert usage.requests == 1


def test_dropped_items_are_told_in_the_usage(server):
    server.push(Reply.json({"facts": ["prefers tabs", 7, {"x": 1}]}))
    result, usage = ask(make_llm(server))
    assert result == Facts(facts=["prefers tabs"])
    assert usage.dropped == [
        "facts[1] 7: Input should be a valid string",
        'facts[2] {"x": 1}: Input should be a valid string',
    ]


def test_one_repair_at_most_when_nothing_parses(server):
    server.push(Reply.text("I am sorry, I cannot."), Reply.text("Still no JSON."), Reply.json(VALID))
    with pytest.raises(LLMInvalidOutput, match="no JSON object in the reply"):
        ask(make_llm(server))
    assert len(server.chat_requests()) == 2
    assert server.pending == 1


def test_every_item_invalid_asks_once_for_a_repair(server):
    server.push(Reply.json({"facts": [1, 2]}), Reply.json(VALID))
    result, usage = ask(make_llm(server))
    assert result == Facts(**VALID)
    assert len(usage.dropped) == 2 and usage.requests == 2


def status_error(status: int, body: object) -> openai.APIStatusError:
    import httpx

    response = httpx.Response(status, json=body, request=httpx.Request("POST", "http://x/v1/chat/completions"))
    return openai.APIStatusError("Error code", response=response, body=body)


def test_two_refusals_of_one_mode_move_it_on_once(server):
    """Two threads sharing the client, refused together: the second finds the mode moved already."""
    llm = make_llm(server)
    refusal = status_error(500, LLAMA_CPP_PYTHON_500)
    assert (llm._switched(refusal, "json_schema"), llm._switched(refusal, "json_schema")) == (True, True)
    assert llm.output_mode == "json_object_schema"


def test_a_repair_that_cannot_quote_the_cut_reply_is_asked_without_it(server):
    cut = '{"facts": ["' + "very long words " * 300
    server.push(Reply(content=cut, finish_reason="length"), Reply.json(VALID))
    llm = make_llm(server, context_window=2_048)
    long_user = "word " * 1_150  # the chunk fills the window but for the reply budget
    result, usage = llm.complete_json(system=SYSTEM, user=long_user, schema=Facts, name="facts", reply_tokens=900)
    assert result == Facts(**VALID)
    first, repair = server.chat_requests()
    assert [m["role"] for m in repair["messages"]] == ["system", "user", "user"]  # the cut reply is not quoted
    assert usage.requests == 2


def test_a_request_too_large_for_the_window_never_counts_toward_the_breaker(server):
    guard = GuardedLLM(make_llm(server, context_window=100), token_budget=100_000, breaker_threshold=1)
    for _ in range(2):
        with pytest.raises(WindowTooSmall):
            ask(guard)
    assert (guard.breaker.failures, guard.breaker.refusing()) == (0, False)
    assert server.chat_requests() == []
