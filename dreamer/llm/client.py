"""The LLM client: JSON answers validated into pydantic models, with retries, one repair and a pass guard."""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import openai
import tenacity
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ConfigDict, ValidationError

from dreamer.core.errors import (
    BudgetExceeded,
    EndpointUnusable,
    LLMError,
    LLMInvalidOutput,
    LLMTimeout,
    TransientLLMError,
    validation_summary,
)
from dreamer.core.tokens import count_tokens
from dreamer.llm.breaker import Breaker

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

RETRY_AFTER_STATUSES = frozenset({429, 503})
REFUSES_EVERY_REQUEST = frozenset({401, 403, 404})  # a bad key, no permission, an unknown model or path
REPAIR_PROMPT = (
    "Your previous reply was not valid: {problem}. "
    "Reply again with only the corrected JSON object, matching the required schema."
)
SCHEMA_PROMPT = "Reply with a single JSON object that matches this JSON schema:\n{schema}"


@dataclass
class Usage:
    """Tokens reported by the server, and how many HTTP requests were made."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.requests + other.requests,
        )

    def add(self, other: Usage) -> None:
        """Add `other` in place."""
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.requests += other.requests


class LLM(Protocol):
    """Asks a model for one JSON object validated into `schema`."""

    name: str

    def complete_json(
        self, *, system: str, user: str, schema: type[M], name: str = "result", attempts: int | None = None
    ) -> tuple[M, Usage]:
        """`attempts`: how many times a transient failure may be tried (None: the client's own)."""
        ...


def retry_delay(attempt: int, *, base: float, cap: float, retry_after: float | None, rand: float) -> float:
    """Full-jitter exponential backoff for retry number `attempt` (1-based).

    The ceiling is ``min(cap, base * 2 ** (attempt - 1))``; the wait is ``rand * ceiling``
    with ``rand`` in [0, 1). A server's Retry-After is a floor: ``max(retry_after, wait)``.
    """
    ceiling = min(cap, base * 2 ** max(attempt - 1, 0))
    wait = rand * ceiling
    if retry_after is not None and retry_after > wait:
        return float(retry_after)
    return wait


@dataclass
class _Answer:
    """The assistant's content, or the reason there is no usable content."""

    content: str | None
    problem: str | None = None


class OpenAILLM:
    """`LLM` over the official openai client; build the client with ``max_retries=0``."""

    def __init__(
        self,
        client: openai.OpenAI,
        *,
        model: str,
        max_retries: int = 4,
        retry_base: float = 1.0,
        retry_cap: float = 30.0,
        json_schema: bool = True,
        temperature: float = 0.0,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.model = model
        self.name = model
        self.max_retries = max_retries
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.json_schema = json_schema
        self.temperature = temperature
        self._sleep = sleep
        self._rand = rand

    def complete_json(
        self, *, system: str, user: str, schema: type[M], name: str = "result", attempts: int | None = None
    ) -> tuple[M, Usage]:
        """One validated answer; at most one repair call. Errors carry ``usage``."""
        usage = Usage()
        tries = self.max_retries + 1 if attempts is None else max(1, attempts)
        try:
            return self._complete(system, user, schema, name, usage, tries), usage
        except LLMError as exc:
            exc.usage = usage  # type: ignore[attr-defined]
            raise

    # --- the conversation -----------------------------------------------------
    def _complete(self, system: str, user: str, schema: type[M], name: str, usage: Usage, tries: int) -> M:
        answer = self._ask(system, user, schema, name, [], usage, tries)
        parsed, problem = _validate(schema, answer)
        if parsed is not None:
            return parsed
        log.warning("invalid output from %s (%s); asking once for a repair", self.model, problem)
        answer = self._ask(system, user, schema, name, _repair_messages(answer, problem), usage, tries)
        parsed, problem = _validate(schema, answer)
        if parsed is not None:
            return parsed
        raise LLMInvalidOutput(f"invalid output after one repair: {problem}")

    def _ask(
        self,
        system: str,
        user: str,
        schema: type[BaseModel],
        name: str,
        extra: list[dict],
        usage: Usage,
        tries: int,
    ) -> _Answer:
        while True:
            messages = [
                {"role": "system", "content": self._system(system, schema)},
                {"role": "user", "content": user},
                *extra,
            ]
            try:
                return self._send_with_retries(messages, self._response_format(schema, name), usage, tries)
            except openai.BadRequestError as exc:
                if not (self.json_schema and _rejects_response_format(exc)):
                    raise _rejected(exc) from exc
                log.warning("%s does not accept json_schema; switching to json_object", self.model)
                self.json_schema = False
            except openai.APIStatusError as exc:
                raise _rejected(exc) from exc

    def _system(self, system: str, schema: type[BaseModel]) -> str:
        if self.json_schema:
            return system
        return f"{system}\n\n{SCHEMA_PROMPT.format(schema=json.dumps(schema.model_json_schema()))}"

    def _response_format(self, schema: type[BaseModel], name: str) -> dict[str, Any]:
        if not self.json_schema:
            return {"type": "json_object"}
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema.model_json_schema(), "strict": False},
        }

    # --- one request, retried -----------------------------------------------------
    def _send_with_retries(self, messages: list[dict], response_format: dict, usage: Usage, tries: int) -> _Answer:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_attempt(tries),
            wait=self._wait,
            sleep=self._sleep,
            before_sleep=_log_retry,
            retry_error_callback=_give_up,
        )
        return retrying(self._send_once, messages, response_format, usage)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return retry_delay(
            state.attempt_number,
            base=self.retry_base,
            cap=self.retry_cap,
            retry_after=retry_after_of(exc),
            rand=self._rand(),
        )

    def _send_once(self, messages: list[dict], response_format: dict, usage: Usage) -> _Answer:
        usage.requests += 1
        try:
            completion = self.client.chat.completions.create(
                model=self.model,
                messages=messages,  # type: ignore[arg-type]
                response_format=response_format,  # type: ignore[arg-type]
                temperature=self.temperature,
            )
        except json.JSONDecodeError as exc:
            return _Answer(None, f"response body is not JSON ({exc.msg})")
        except openai.APIResponseValidationError as exc:
            return _Answer(None, f"response body is not a chat completion ({exc.message})")
        if not isinstance(completion, ChatCompletion):
            return _Answer(None, "response body is not a chat completion")
        _add_usage(usage, completion)
        return _answer_of(completion)


# --- helpers ------------------------------------------------------------------------


def is_transient(exc: BaseException) -> bool:
    """429, 5xx, timeouts and connection errors are worth retrying."""
    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code == 429 or exc.status_code >= 500
    return False


def retry_after_of(exc: BaseException | None) -> float | None:
    """The Retry-After seconds of a 429/503 answer, when present and numeric."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in RETRY_AFTER_STATUSES:
        return None
    value = exc.response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        log.debug("ignoring non-numeric Retry-After %r", value)
        return None
    return seconds if seconds >= 0 else None


def _describe(exc: BaseException | None) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {_error_message(exc)}"
    return f"{type(exc).__name__}: {exc}"


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return body["message"]
    return exc.message


def _rejected(exc: openai.APIStatusError) -> LLMError:
    """A refusal of this request (400, 413, 422: counts toward its session's quarantine), or of
    every request (401, 403, 404: a key or model to fix, not the session's fault)."""
    kind = EndpointUnusable if exc.status_code in REFUSES_EVERY_REQUEST else LLMError
    return kind(f"LLM request rejected, {_describe(exc)}")


def _rejects_response_format(exc: openai.BadRequestError) -> bool:
    return exc.param == "response_format" or "response_format" in _error_message(exc)


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    log.warning(
        "LLM request failed (%s); retry %d in %.2fs", _describe(exc), state.attempt_number, state.upcoming_sleep
    )


def _give_up(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    kind = LLMTimeout if isinstance(exc, openai.APITimeoutError) else TransientLLMError
    raise kind(
        f"LLM unavailable after {state.attempt_number} attempts, {_describe(exc)}", delay=state.upcoming_sleep
    ) from exc


def _add_usage(usage: Usage, completion: ChatCompletion) -> None:
    reported = getattr(completion, "usage", None)
    if reported is None:
        return
    usage.prompt_tokens += reported.prompt_tokens or 0
    usage.completion_tokens += reported.completion_tokens or 0


def _answer_of(completion: ChatCompletion) -> _Answer:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        return _Answer(None, "no choices in the response")
    choice = choices[0]
    message = choice.message
    if getattr(message, "refusal", None):
        return _Answer(None, f"the model refused: {message.refusal}")
    if choice.finish_reason == "length":
        return _Answer(message.content, "output truncated (finish_reason=length)")
    if not message.content:
        return _Answer(None, "empty content")
    return _Answer(message.content)


def _validate(schema: type[M], answer: _Answer) -> tuple[M | None, str]:
    if answer.problem is not None or answer.content is None:
        return None, answer.problem or "empty content"
    try:
        return schema.model_validate_json(answer.content), ""
    except ValidationError as exc:
        return None, validation_summary(exc)


def _repair_messages(answer: _Answer, problem: str) -> list[dict]:
    messages: list[dict] = []
    if answer.content:
        messages.append({"role": "assistant", "content": answer.content})
    messages.append({"role": "user", "content": REPAIR_PROMPT.format(problem=problem)})
    return messages


# --- the pass guard -----------------------------------------------------------------


class GuardedLLM:
    """Wraps an `LLM` for one pass: a token budget and a consecutive-failure `Breaker` that
    stays open for the rest of the pass.

    ``calls`` counts HTTP requests (retries and repairs included) as reported in ``Usage.requests``;
    ``answered`` the calls the endpoint answered (validly or not).
    A `breaker_threshold` of 0 or less disables the breaker. A call starts only while the tokens
    spent plus its prompt (counted here) fit the budget, so the pass can go over it by at most
    the completion of its last call.
    """

    def __init__(self, inner: LLM, *, token_budget: int, breaker_threshold: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.token_budget = token_budget
        self.breaker = Breaker(breaker_threshold)
        self.calls = 0
        self.answered = 0
        self.usage = Usage()

    def complete_json(
        self, *, system: str, user: str, schema: type[M], name: str = "result", attempts: int | None = None
    ) -> tuple[M, Usage]:
        self._check_budget(count_tokens(system) + count_tokens(user))  # a refusal, not a failure of the model
        return self.breaker.call(lambda: self._spend(system, user, schema, name, attempts))

    def _spend(self, system: str, user: str, schema: type[M], name: str, attempts: int | None) -> tuple[M, Usage]:
        """The call, its usage recorded whether it succeeds or fails."""
        try:
            result, usage = self.inner.complete_json(
                system=system, user=user, schema=schema, name=name, attempts=attempts
            )
        except LLMError as exc:
            self._record(getattr(exc, "usage", None))
            self.answered += 1 if isinstance(exc, LLMInvalidOutput) else 0  # it answered, if not validly
            raise
        self._record(usage)
        self.answered += 1
        return result, usage

    def _check_budget(self, prompt_tokens: int) -> None:
        spent = self.usage.total_tokens
        if spent >= self.token_budget:
            raise BudgetExceeded(f"token budget spent: {spent} of {self.token_budget} tokens")
        if spent + prompt_tokens > self.token_budget:
            raise BudgetExceeded(
                f"token budget nearly spent: {spent} of {self.token_budget} tokens, "
                f"the next call needs {prompt_tokens} for its prompt alone"
            )

    def _record(self, usage: Usage | None) -> None:
        usage = usage if usage is not None else Usage()
        self.usage.add(usage)
        self.calls += max(usage.requests, 1)


class Probe(BaseModel):
    """Whatever JSON object the endpoint sends back to a probe."""

    model_config = ConfigDict(extra="allow")


PROBE_SYSTEM = 'Answer with the JSON object {"ok": true}.'


def endpoint_answers(llm: LLM) -> bool:
    """Whether the endpoint answers a minimal request now, asked once (an answer the model could
    not make valid still says it answered); a refusal to call (an open breaker, a spent budget)
    or a failed request says no."""
    try:
        llm.complete_json(system=PROBE_SYSTEM, user="ok?", schema=Probe, name="probe", attempts=1)
    except LLMInvalidOutput:
        return True
    except LLMError:
        return False
    return True


# --- construction -------------------------------------------------------------------


def build_openai_client(settings: Settings) -> openai.OpenAI:
    """The openai client for `settings`, with its own retries off (``max_retries=0``).

    `OpenAILLM` owns the retry policy (backoff, Retry-After, error mapping); leaving the
    client's built-in retries on would multiply attempts and hide them from the counts.
    """
    return openai.OpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key or "none",
        timeout=settings.llm_timeout,
        max_retries=0,
    )


def build_llm(settings: Settings) -> LLM | None:
    """An `OpenAILLM` for the configured endpoint, or None when no endpoint is set."""
    if not settings.llm_base_url:
        return None
    return OpenAILLM(
        build_openai_client(settings),
        model=settings.llm_model,
        max_retries=settings.llm_max_retries,
        retry_base=settings.llm_retry_base,
        retry_cap=settings.llm_retry_cap,
        json_schema=settings.llm_json_schema,
    )
