"""The LLM client: JSON answers validated into pydantic models, with one repair; its retry policy
is `dreamer.llm.retry`, the pass guard around it `dreamer.llm.guard`."""

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
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat
from pydantic import BaseModel, ValidationError

from dreamer.core.errors import (
    LLMError,
    LLMInvalidOutput,
    json_reason,
    validation_summary,
)
from dreamer.llm.retry import (
    give_up,
    is_transient,
    log_retry,
    rejected,
    rejects_response_format,
    retry_after_of,
    retry_delay,
)

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

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
        extra: list[ChatCompletionMessageParam],
        usage: Usage,
        tries: int,
    ) -> _Answer:
        while True:
            messages: list[ChatCompletionMessageParam] = [
                {"role": "system", "content": self._system(system, schema)},
                {"role": "user", "content": user},
                *extra,
            ]
            try:
                return self._send_with_retries(messages, self._response_format(schema, name), usage, tries)
            except openai.BadRequestError as exc:
                if not (self.json_schema and rejects_response_format(exc)):
                    raise rejected(exc) from exc
                log.warning("%s does not accept json_schema; switching to json_object", self.model)
                self.json_schema = False
            except openai.APIStatusError as exc:
                raise rejected(exc) from exc

    def _system(self, system: str, schema: type[BaseModel]) -> str:
        if self.json_schema:
            return system
        wire = json.dumps(wire_schema(schema), separators=(",", ":"))
        return f"{system}\n\n{SCHEMA_PROMPT.format(schema=wire)}"

    def _response_format(self, schema: type[BaseModel], name: str) -> ResponseFormat:
        if not self.json_schema:
            return {"type": "json_object"}
        return schema_format(schema, name)

    # --- one request, retried -----------------------------------------------------
    def _send_with_retries(
        self, messages: list[ChatCompletionMessageParam], response_format: ResponseFormat, usage: Usage, tries: int
    ) -> _Answer:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_attempt(tries),
            wait=self._wait,
            sleep=self._sleep,
            before_sleep=log_retry,
            retry_error_callback=give_up,
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

    def _send_once(
        self, messages: list[ChatCompletionMessageParam], response_format: ResponseFormat, usage: Usage
    ) -> _Answer:
        usage.requests += 1
        try:
            completion = self.client.chat.completions.create(
                model=self.model,
                messages=messages,
                response_format=response_format,
                temperature=self.temperature,
            )
        except json.JSONDecodeError as exc:
            return _Answer(None, f"response body is not JSON ({json_reason(exc, f'character {exc.pos}')})")
        except openai.APIResponseValidationError as exc:
            return _Answer(None, f"response body is not a chat completion ({exc.message})")
        if not isinstance(completion, ChatCompletion):
            return _Answer(None, "response body is not a chat completion")
        _add_usage(usage, completion)
        return _answer_of(completion)


_METADATA = ("title", "description", "default")


def schema_format(schema: type[BaseModel], name: str) -> ResponseFormat:
    """The `response_format` asking for a JSON object of `schema` (see `wire_schema`)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": wire_schema(schema), "strict": False}}


def wire_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema sent with a request: the model's, without titles, descriptions and
    defaults. The prompt card describes every field (`dreamer.llm.cards`), `required` says which
    may be left out, and an endpoint bills each token of the schema on every call."""
    stripped: dict[str, Any] = _strip(schema.model_json_schema())
    return stripped


def _strip(node: Any) -> Any:
    if isinstance(node, list):
        return [_strip(v) for v in node]
    if not isinstance(node, dict):
        return node
    return {
        key: ({name: _strip(v) for name, v in value.items()} if key in ("properties", "$defs") else _strip(value))
        for key, value in node.items()
        if key not in _METADATA
    }


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


def _repair_messages(answer: _Answer, problem: str) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = []
    if answer.content:
        messages.append({"role": "assistant", "content": answer.content})
    messages.append({"role": "user", "content": REPAIR_PROMPT.format(problem=problem)})
    return messages


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
