"""The LLM client against the scripted server over real HTTP: validation, repair, retries, guard."""

from __future__ import annotations

import json
import random

import openai
import pytest
from pydantic import BaseModel, Field

from dreamer.core.errors import (
    BudgetExceeded,
    CircuitOpen,
    LLMError,
    LLMInvalidOutput,
    LLMTimeout,
    TransientLLMError,
)
from dreamer.llm.bill import billed_prompt
from dreamer.llm.client import (
    LLM,
    OpenAILLM,
    Usage,
    build_llm,
    build_openai_client,
    wire_schema,
)
from dreamer.llm.guard import GuardedLLM, endpoint_answers
from dreamer.llm.retry import retry_delay
from dreamer.llm.scripted.server import Reply, ScriptedServer

SYSTEM = "Extract durable facts about the user."
USER = "I always use tabs, never spaces."
VALID = {"facts": ["prefers tabs"], "confidence": 0.9}


class Facts(BaseModel):
    facts: list[str]
    confidence: float


# The schema sent: the model's without titles and descriptions (the prompt card describes the fields).
WIRE = {
    "properties": {"facts": {"items": {"type": "string"}, "type": "array"}, "confidence": {"type": "number"}},
    "required": ["facts", "confidence"],
    "type": "object",
}


class Titled(BaseModel):
    """A docstring the schema would carry as its description."""

    title: str = Field(description="a field named title")
    description: str = Field("", title="Described")


def test_the_schema_sent_drops_titles_descriptions_and_defaults_but_no_field():
    assert wire_schema(Titled) == {
        "properties": {"title": {"type": "string"}, "description": {"type": "string"}},
        "required": ["title"],
        "type": "object",
    }


@pytest.fixture
def server():
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture
def waits() -> list[float]:
    return []


def make_llm(server: ScriptedServer, waits: list[float], *, timeout: float = 5.0, **kwargs) -> OpenAILLM:
    """A client with its own retries off; backoff waits are recorded, never slept; jitter fixed at 0.5."""
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0, timeout=timeout)
    kwargs.setdefault("rand", lambda: 0.5)
    return OpenAILLM(client, model="test-model", sleep=waits.append, **kwargs)


def ask(llm: LLM) -> tuple[Facts, Usage]:
    return llm.complete_json(system=SYSTEM, user=USER, schema=Facts, name="facts")


def reported(server: ScriptedServer) -> tuple[int, int]:
    """Prompt and completion tokens the server reported over all answered requests."""
    answered = [r["usage"] for r in server.requests if "usage" in r]
    return sum(u["prompt_tokens"] for u in answered), sum(u["completion_tokens"] for u in answered)


# --- valid output and the request shape --------------------------------------------------


def test_valid_output_is_validated(server, waits):
    server.push(Reply.json(VALID))
    result, usage = ask(make_llm(server, waits))
    assert result == Facts(**VALID)
    assert usage.requests == 1
    assert (usage.prompt_tokens, usage.completion_tokens) == reported(server)
    assert usage.prompt_tokens > 0 and usage.completion_tokens > 0
    assert waits == []


def test_request_shape(server, waits):
    server.push(Reply.json(VALID))
    ask(make_llm(server, waits, temperature=0.2))
    body = server.chat_requests()[0]
    assert body["model"] == "test-model"
    assert body["temperature"] == 0.2
    assert body["messages"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "facts", "schema": WIRE, "strict": False},
    }


# --- json_schema fallback -----------------------------------------------------------------


def test_json_schema_refused_falls_back_to_json_object(waits):
    with ScriptedServer(json_schema=False) as srv:
        srv.push(Reply.json(VALID), Reply.json(VALID))
        llm = make_llm(srv, waits)
        result, usage = ask(llm)
        assert result == Facts(**VALID)
        first, second = srv.chat_requests()
        assert first["response_format"]["type"] == "json_schema"
        assert second["response_format"] == {"type": "json_object", "schema": WIRE}
        assert second["messages"][0]["content"].startswith(SYSTEM)
        assert json.dumps(WIRE, separators=(",", ":")) in second["messages"][0]["content"]
        assert usage.requests == 2  # the refused request counts: it was made
        assert waits == []
        assert llm.output_mode == "json_object_schema"

        ask(llm)  # the switch is permanent for this instance
        assert srv.chat_requests()[2]["response_format"] == {"type": "json_object", "schema": WIRE}
        assert len(srv.requests) == 3


def test_json_object_mode_from_the_start(server, waits):
    server.push(Reply.json(VALID))
    ask(make_llm(server, waits, output_mode="json_object"))
    (body,) = server.chat_requests()
    assert body["response_format"] == {"type": "json_object"}
    assert "JSON schema" in body["messages"][0]["content"]


def test_other_bad_request_is_not_a_fallback(server, waits):
    body = {"error": {"message": "model not allowed", "type": "invalid_request_error"}}
    server.push(Reply.error(400, body=body))
    with pytest.raises(LLMError) as info:
        ask(make_llm(server, waits))
    assert type(info.value) is LLMError
    assert "model not allowed" in str(info.value)
    assert len(server.requests) == 1


# --- repair -----------------------------------------------------------------------------


def test_one_repair_on_invalid_json_then_success(server, waits):
    server.push(Reply.text("Sure! Here are the facts: tabs"), Reply.json(VALID))
    result, usage = ask(make_llm(server, waits))
    assert result == Facts(**VALID)
    assert usage.requests == 2
    repair = server.chat_requests()[1]["messages"]
    assert repair[:2] == server.chat_requests()[0]["messages"]
    assert repair[2] == {"role": "assistant", "content": "Sure! Here are the facts: tabs"}
    assert repair[3]["role"] == "user" and "not valid" in repair[3]["content"]
    assert waits == []


def test_repair_on_schema_mismatch(server, waits):
    server.push(Reply.json({"facts": "not a list"}), Reply.json(VALID))
    result, _ = ask(make_llm(server, waits))
    assert result == Facts(**VALID)
    note = server.chat_requests()[1]["messages"][-1]["content"]
    assert "confidence: Field required" in note  # a lone string where a list was asked is read as a list of one


def test_repair_also_invalid_raises_after_two_requests(server, waits):
    server.push(Reply.text("nope").with_usage(50, 3), Reply.json({"facts": []}).with_usage(70, 4))
    with pytest.raises(LLMInvalidOutput) as info:
        ask(make_llm(server, waits))
    assert len(server.requests) == 2
    assert "confidence" in str(info.value)
    assert info.value.usage == Usage(prompt_tokens=120, completion_tokens=7, requests=2)


@pytest.mark.parametrize(
    "fault,problem",
    [
        (Reply.malformed(), "not JSON"),
        (Reply.truncated(VALID), "truncated"),
        (Reply.empty_choices(), "no choices"),
        (Reply.refusal("I won't."), "refused"),
        (Reply(content=None), "empty content"),
    ],
    ids=["malformed", "truncated", "empty-choices", "refusal", "null-content"],
)
def test_faulty_answers_take_the_repair_path(server, waits, fault, problem):
    server.push(fault, Reply.json(VALID))
    result, usage = ask(make_llm(server, waits))
    assert result == Facts(**VALID)
    assert usage.requests == 2
    assert problem in server.chat_requests()[1]["messages"][-1]["content"]
    assert waits == []


@pytest.mark.parametrize(
    "fault",
    [Reply.malformed(), Reply.truncated(VALID), Reply.empty_choices(), Reply.refusal("no")],
    ids=["malformed", "truncated", "empty", "refusal"],
)
def test_faulty_twice_is_invalid_output(server, waits, fault):
    server.push(fault.times(2))
    with pytest.raises(LLMInvalidOutput):
        ask(make_llm(server, waits))
    assert len(server.requests) == 2


def test_truncated_repair_shows_the_partial_output(server, waits):
    server.push(Reply.truncated(VALID), Reply.json(VALID))
    ask(make_llm(server, waits))
    messages = server.chat_requests()[1]["messages"]
    assert messages[2]["role"] == "assistant"
    assert json.dumps(VALID).startswith(messages[2]["content"])


# --- usage ------------------------------------------------------------------------------


def test_usage_summed_exactly_over_repair(server, waits):
    server.push(Reply.text("bad").with_usage(100, 7), Reply.json(VALID).with_usage(120, 9))
    _, usage = ask(make_llm(server, waits))
    assert usage == Usage(prompt_tokens=220, completion_tokens=16, requests=2)
    assert usage.total_tokens == 236


def test_usage_matches_computed_server_numbers(server, waits):
    server.push(Reply.error(500), Reply.text("bad"), Reply.json(VALID))
    _, usage = ask(make_llm(server, waits))
    assert usage.requests == 3
    assert (usage.prompt_tokens, usage.completion_tokens) == reported(server)


def test_usage_addition():
    total = Usage(1, 2, 3) + Usage(10, 20, 30)
    assert total == Usage(11, 22, 33)
    total.add(Usage(1, 1, 1))
    assert total == Usage(12, 23, 34)


# --- retries ----------------------------------------------------------------------------


def test_server_errors_then_success(server, waits):
    server.push(Reply.error(500), Reply.error(502), Reply.error(503), Reply.json(VALID))
    result, usage = ask(make_llm(server, waits))
    assert result == Facts(**VALID)
    assert usage.requests == 4
    assert waits == [0.5, 1.0, 2.0]  # rand 0.5 times 1, 2, 4


def test_rate_limit_honours_retry_after(server, waits):
    server.push(Reply.error(429, retry_after=2), Reply.json(VALID))
    llm = make_llm(server, waits, rand=random.random)
    ask(llm)
    assert len(waits) == 1 and waits[0] >= 2
    assert len(server.requests) == 2


def test_rate_limit_without_retry_after(server, waits):
    server.push(Reply.error(429), Reply.json(VALID))
    ask(make_llm(server, waits))
    assert waits == [0.5]


def test_retry_after_on_503_but_not_on_500(server, waits):
    server.push(Reply.error(503, retry_after=7), Reply.error(500, retry_after=7), Reply.json(VALID))
    ask(make_llm(server, waits))
    assert waits == [7.0, 1.0]


def test_backoff_is_capped(server, waits):
    server.push(Reply.error(503).times(4), Reply.json(VALID))
    ask(make_llm(server, waits, retry_base=2.0, retry_cap=5.0, rand=lambda: 0.9))
    assert waits == pytest.approx([1.8, 3.6, 4.5, 4.5])


def test_a_timed_out_request_is_not_sent_again(server, waits):
    """The server may still be working on it: a second copy would only queue behind the first."""
    server.push(Reply.delay(2.0, Reply.json(VALID)), Reply.json(VALID))
    with pytest.raises(LLMTimeout, match="timed out") as info:
        ask(make_llm(server, waits, timeout=0.4, max_retries=3))
    assert info.value.usage.requests == 1
    assert waits == []
    assert server.pending == 1


def test_a_timed_out_call_is_billed_its_counted_prompt_then_what_the_server_reported(server, waits):
    server.push(Reply.delay(1.4, Reply.json(VALID)), Reply.delay(3.0, Reply.json(VALID)))
    guarded = GuardedLLM(make_llm(server, waits, timeout=1.0), token_budget=10**6, breaker_threshold=5)
    for _ in range(2):
        with pytest.raises(LLMTimeout, match=r"timed out after 1s \(APITimeoutError\)"):
            ask(guarded)
    counted = billed_prompt(SYSTEM, USER, Facts, "facts")
    assert (guarded.usage.prompt_tokens, guarded.usage.completion_tokens, guarded.usage.unbilled) == (2 * counted, 0, 2)
    guarded.usage.settle()  # the first answers within twice its timeout; the second is given up
    [first, _second] = [r.get("usage") for r in server.requests]
    assert first["prompt_tokens"] == counted
    assert (guarded.usage.prompt_tokens, guarded.usage.completion_tokens, guarded.usage.unbilled) == (
        2 * counted,
        first["completion_tokens"],
        1,
    )
    assert guarded.calls == 2


def test_a_dropped_connection_through_every_retry_is_transient(server, waits):
    server.push(Reply.drop().times(2))
    with pytest.raises(TransientLLMError) as info:
        ask(make_llm(server, waits, max_retries=1))
    assert not isinstance(info.value, LLMTimeout)


def test_the_probe_asks_whether_the_endpoint_answers_at_all(server, waits):
    server.push(Reply.json({"ok": True}), Reply.json({"anything": [1]}), Reply.malformed().times(2))
    llm = make_llm(server, waits, max_retries=0)
    assert [endpoint_answers(llm) for _ in range(3)] == [True, True, True]  # output it cannot make valid is an answer
    server.push(Reply.delay(2.0, Reply.json({"ok": True})), Reply.error(503))
    slow = make_llm(server, waits, timeout=0.4, max_retries=0)
    assert [endpoint_answers(slow), endpoint_answers(slow)] == [False, False]
    guarded = GuardedLLM(make_llm(server, waits), token_budget=10, breaker_threshold=3)
    assert endpoint_answers(guarded) is False  # a call the budget refuses says no
    assert len(server.requests) == 6


def test_connection_drop_is_retried(server, waits):
    server.push(Reply.drop(), Reply.json(VALID))
    result, usage = ask(make_llm(server, waits))
    assert result == Facts(**VALID)
    assert usage.requests == 2
    assert waits == [0.5]


def test_server_gone_is_transient(waits):
    srv = ScriptedServer().start()
    llm = make_llm(srv, waits, max_retries=1)
    srv.stop()
    with pytest.raises(TransientLLMError):
        ask(llm)
    assert len(waits) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422, 501, 505])
def test_client_errors_fail_at_once(server, waits, status):
    server.push(Reply.error(status), Reply.json(VALID))
    with pytest.raises(LLMError) as info:
        ask(make_llm(server, waits))
    assert not isinstance(info.value, (TransientLLMError, LLMInvalidOutput))
    assert f"HTTP {status}" in str(info.value)
    assert len(server.requests) == 1
    assert info.value.usage.requests == 1
    assert waits == []


def test_retries_exhausted(server, waits):
    server.push(Reply.error(503).times(10))
    with pytest.raises(TransientLLMError) as info:
        ask(make_llm(server, waits, max_retries=2))
    assert len(server.requests) == 3
    assert waits == [0.5, 1.0]
    assert info.value.delay == 2.0  # the wait the next attempt would have had
    assert info.value.usage.requests == 3
    assert "HTTP 503" in str(info.value)
    assert isinstance(info.value.__cause__, openai.InternalServerError)


def test_retries_exhausted_with_retry_after_carries_it(server, waits):
    server.push(Reply.error(429, retry_after=9).times(10))
    with pytest.raises(TransientLLMError) as info:
        ask(make_llm(server, waits, max_retries=1))
    assert len(server.requests) == 2
    assert waits == [9.0]
    assert info.value.delay == 9.0


def test_no_retries(server, waits):
    server.push(Reply.error(500))
    with pytest.raises(TransientLLMError):
        ask(make_llm(server, waits, max_retries=0))
    assert len(server.requests) == 1 and waits == []


# --- retry_delay ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "attempt,base,cap,retry_after,rand,expected",
    [
        (1, 1.0, 30.0, None, 0.5, 0.5),
        (2, 1.0, 30.0, None, 0.5, 1.0),
        (3, 1.0, 30.0, None, 0.25, 1.0),
        (4, 0.5, 30.0, None, 0.5, 2.0),
        (6, 1.0, 30.0, None, 0.5, 15.0),  # 32 capped at 30
        (20, 1.0, 30.0, None, 0.999, 29.97),
        (1, 1.0, 30.0, None, 0.0, 0.0),
        (1, 1.0, 30.0, 2.0, 0.5, 2.0),  # Retry-After is a floor
        (4, 1.0, 30.0, 2.0, 0.75, 6.0),  # computed beats a smaller Retry-After
        (1, 1.0, 30.0, 60.0, 0.5, 60.0),  # Retry-After may exceed the cap
        (0, 1.0, 30.0, None, 0.5, 0.5),
    ],
)
def test_compute_backoff(attempt, base, cap, retry_after, rand, expected):
    got = retry_delay(attempt, base=base, cap=cap, retry_after=retry_after, rand=rand)
    assert got == pytest.approx(expected)


# --- GuardedLLM ---------------------------------------------------------------------------


def test_guard_budget_stops_before_a_call(server, waits):
    server.push(Reply.json(VALID).with_usage(60, 40).times(5))
    guard = GuardedLLM(make_llm(server, waits), token_budget=170, breaker_threshold=3)
    ask(guard)
    ask(guard)  # 100 spent and a 68-token prompt fit 170, so it runs
    assert guard.usage == Usage(120, 80, 2)
    with pytest.raises(BudgetExceeded) as info:
        ask(guard)
    assert "200 of 170" in str(info.value)
    assert len(server.requests) == 2
    assert guard.calls == 2


def test_guard_budget_counts_the_prompt_as_the_endpoint_bills_it(server, waits):
    server.push(Reply.json(VALID).with_usage(60, 40), Reply.json(VALID))
    guard = GuardedLLM(make_llm(server, waits), token_budget=150, breaker_threshold=3)
    ask(guard)
    with pytest.raises(BudgetExceeded) as info:
        ask(guard)  # the schema and each message's overhead are billed too: 100 + 68 > 150
    assert "the next call needs 68 for its prompt alone" in str(info.value)
    ask(make_llm(server, waits))  # the same call, unguarded
    assert server.requests[-1]["usage"]["prompt_tokens"] == 68


def test_guard_breaker_opens_after_consecutive_failures(server, waits):
    server.push(Reply.error(401).times(2), Reply.json(VALID))
    guard = GuardedLLM(make_llm(server, waits), token_budget=10_000, breaker_threshold=2)
    for _ in range(2):
        with pytest.raises(LLMError):
            ask(guard)
    assert guard.breaker.failures == 2
    assert guard.breaker.open_reason is not None
    assert "2 consecutive" in guard.breaker.open_reason and "HTTP 401" in guard.breaker.open_reason
    with pytest.raises(CircuitOpen) as info:
        ask(guard)
    assert guard.breaker.open_reason in str(info.value)
    assert len(server.requests) == 2


def test_guard_success_resets_failures(server, waits):
    server.push(Reply.error(400), Reply.json(VALID), Reply.error(400), Reply.json(VALID))
    guard = GuardedLLM(make_llm(server, waits), token_budget=10_000, breaker_threshold=2)
    with pytest.raises(LLMError):
        ask(guard)
    ask(guard)
    assert guard.breaker.failures == 0
    with pytest.raises(LLMError):
        ask(guard)
    ask(guard)
    assert guard.breaker.open_reason is None


def test_guard_counts_every_request_and_invalid_output_never_opens_the_breaker(server, waits):
    server.push(Reply.error(500), Reply.text("bad"), Reply.json(VALID), Reply.text("x").times(2))
    guard = GuardedLLM(make_llm(server, waits), token_budget=10_000, breaker_threshold=1)
    ask(guard)
    assert guard.calls == 3
    with pytest.raises(LLMInvalidOutput):
        ask(guard)
    assert guard.calls == 5
    assert guard.usage.requests == 5
    assert guard.usage.total_tokens == sum(reported(server))
    assert (guard.breaker.failures, guard.breaker.open_reason) == (0, None)  # the endpoint answered
    server.push(Reply.error(401))
    with pytest.raises(LLMError):
        ask(guard)
    with pytest.raises(CircuitOpen):  # an endpoint refusing every request opens it
        ask(guard)


def test_guard_counts_transient_failures(server, waits):
    server.push(Reply.error(503).times(3))
    guard = GuardedLLM(make_llm(server, waits, max_retries=2), token_budget=10_000, breaker_threshold=3)
    with pytest.raises(TransientLLMError):
        ask(guard)
    assert guard.calls == 3
    assert guard.breaker.failures == 1


# --- construction -------------------------------------------------------------------------


def test_build_llm_none_without_endpoint(settings):
    assert build_llm(settings) is None


def test_build_llm_end_to_end(settings, server):
    settings = settings.model_copy(
        update={
            "llm_base_url": server.url,
            "llm_model": "m-x",
            "llm_timeout": 7.0,
            "llm_max_retries": 0,
            "llm_output_mode": "json_object",
        }
    )
    client = build_openai_client(settings)
    assert client.max_retries == 0
    assert client.timeout == 7.0
    llm = build_llm(settings)
    assert llm is not None and (llm.output_mode, llm.forced) == ("json_object", True)
    assert isinstance(llm, OpenAILLM) and llm.name == "m-x" and llm.max_retries == 0
    server.push(Reply.json(VALID))
    result, _ = ask(llm)
    assert result == Facts(**VALID)
    body = server.chat_requests()[0]
    assert body["model"] == "m-x" and body["response_format"] == {"type": "json_object"}
    assert server.requests[0]["headers"]["authorization"] == "Bearer none"


def test_a_set_timeout_wins_over_the_one_learnt_for_the_endpoint(settings):
    local = settings.model_copy(update={"llm_base_url": "http://127.0.0.1:8080/v1"})
    assert build_openai_client(local, 99.0).timeout == 99.0  # what llm check learnt
    assert build_openai_client(local).timeout == 300.0  # nothing learnt: a local model's default
    assert build_openai_client(local.model_copy(update={"llm_timeout": 7.0}), 99.0).timeout == 7.0
