"""The LLM client: JSON answers read as far as they are valid (`dreamer.llm.salvage`), with one
repair; the structured-output mode negotiated per endpoint (`dreamer.llm.formats`); every request
fitted to the model's window with a reply budget. Its retry policy is `dreamer.llm.retry`, the
pass guard around it `dreamer.llm.guard`."""

from __future__ import annotations

import json
import logging
import math
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import openai
import tenacity
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import BaseModel

from dreamer.core.errors import LLMError, LLMInvalidOutput, WindowTooSmall, json_reason
from dreamer.llm.answers import Answer, add_usage, answer_of, read_answer, repair_messages
from dreamer.llm.bill import prompt_tokens_of
from dreamer.llm.formats import (
    OUTPUT_MODES,
    OutputMode,
    as_mode,
    error_text,
    next_mode,
    rejects_format,
    response_format,
    schema_format,
    system_prompt,
    wire_schema,
)
from dreamer.llm.late import seconds_of, send_within
from dreamer.llm.retry import give_up, is_transient, log_retry, rejected, retry_after_of, retry_delay
from dreamer.llm.usage import Usage
from dreamer.llm.window import window_from_error

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

__all__ = ["LLM", "OpenAILLM", "Usage", "schema_format", "wire_schema", "build_llm", "build_openai_client"]

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)

DEFAULT_WINDOW = 8_192  # tokens, for an endpoint that does not tell its window and no setting
TOKEN_MARGIN = 1.2  # the model's tokenizer may count a prompt this much above ours, until it reports its own
MAX_MARGIN = 1.5
MIN_REPLY = 64  # a request leaving less room than this for its reply is not sent


class LLM(Protocol):
    """Asks a model for one JSON object validated into `schema`."""

    name: str

    def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: type[M],
        name: str = "result",
        attempts: int | None = None,
        reply_tokens: int | None = None,
    ) -> tuple[M, Usage]:
        """`attempts`: how many times a transient failure may be tried (None: the client's own);
        `reply_tokens`: the reply's budget (None: the client's own)."""
        ...

    def room(self, system: str, schema: type[BaseModel], reply_tokens: int) -> int:
        """How many tokens of user text (as `dreamer.core.tokens` counts them) a call with this
        system prompt and reply budget can carry in the model's window."""
        ...


class OpenAILLM:
    """`LLM` over the official openai client; build the client with ``max_retries=0``.

    `output_mode` is the structured-output mode to start with (None: the first of `OUTPUT_MODES`); unless
    `forced`, a refusal of it moves to the next at once and `on_mode` is told the one that
    answered, so a store can remember it for the endpoint."""

    def __init__(
        self,
        client: openai.OpenAI,
        *,
        model: str,
        max_retries: int = 4,
        retry_base: float = 1.0,
        retry_cap: float = 30.0,
        output_mode: OutputMode | None = None,
        forced: bool = False,
        context_window: int = DEFAULT_WINDOW,
        reply_tokens: int = 4_096,
        temperature: float = 0.0,
        on_mode: Callable[[OutputMode], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.model = model
        self.name = model
        self.max_retries = max_retries
        self.retry_base = retry_base
        self.retry_cap = retry_cap
        self.output_mode: OutputMode = output_mode or OUTPUT_MODES[0]
        self.forced = forced
        self.context_window = context_window
        self.reply_tokens = reply_tokens
        self.temperature = temperature
        self.margin = TOKEN_MARGIN
        self._on_mode = on_mode
        self._lock = threading.Lock()  # the flusher's workers and the API's threads share one client
        self._told: OutputMode | None = output_mode
        self._sleep = sleep
        self._rand = rand

    def complete_json(
        self,
        *,
        system: str,
        user: str,
        schema: type[M],
        name: str = "result",
        attempts: int | None = None,
        reply_tokens: int | None = None,
    ) -> tuple[M, Usage]:
        """One answer, read as far as it is valid; at most one repair call. Errors carry ``usage``."""
        usage = Usage()
        tries = self.max_retries + 1 if attempts is None else max(1, attempts)
        call = _Call(system, user, name, reply_tokens, tries)
        try:
            return self._complete(call, schema, usage), usage
        except LLMError as exc:
            exc.usage = usage  # type: ignore[attr-defined]
            raise

    def room(self, system: str, schema: type[BaseModel], reply_tokens: int) -> int:
        body = self._body(system, "", schema, "result", [])
        fixed = math.ceil(prompt_tokens_of(body) * self.margin)
        return max(0, math.floor((self.context_window - fixed - self.reply_budget(reply_tokens)) / self.margin))

    def reply_budget(self, wanted: int | None) -> int:
        """The reply budget of a call that wants `wanted` (None: the client's own): at most the
        client's, and at most a quarter of the window, so a small window still holds a transcript."""
        share = max(4 * MIN_REPLY, self.context_window // 4)
        return min(wanted or self.reply_tokens, self.reply_tokens, share)

    # --- the conversation -----------------------------------------------------
    def _complete(self, call: _Call, schema: type[M], usage: Usage) -> M:
        answer = self._ask(call, schema, [], usage)
        got = read_answer(schema, answer, usage)
        if not got.empty_handed and got.value is not None:
            return got.value
        problem = got.problem or "; ".join(got.dropped[:3]) or "no valid item"
        repair = self._repair_that_fits(call, schema, answer, problem)
        if repair is None:  # not even the repair prompt fits beside the card: the reply stays what it was
            raise LLMInvalidOutput(f"no valid answer, and no room in the window to ask for a repair: {problem}")
        log.warning("no valid answer from %s (%s); asking once for a repair", self.model, problem)
        answer = self._ask(call, schema, repair, usage)
        got = read_answer(schema, answer, usage)
        if not got.empty_handed and got.value is not None:
            return got.value
        raise LLMInvalidOutput(f"no valid answer after one repair: {got.problem or '; '.join(got.dropped[:3])}")

    def _repair_that_fits(
        self, call: _Call, schema: type[BaseModel], answer: Answer, problem: str
    ) -> list[ChatCompletionMessageParam] | None:
        """The repair turn: with the invalid reply quoted when the window holds it, else without it
        (a reply cut at its budget fills the room the chunk left); None when neither fits."""
        for quoted in (answer, Answer(None)):
            extra = repair_messages(quoted, problem)
            if self._budget(self._body(call.system, call.user, schema, call.name, extra), call) is not None:
                return extra
        return None

    def _budget(self, body: _Body, call: _Call) -> int | None:
        """The reply budget `body` leaves in the window; None when it leaves too little."""
        room = self.context_window - math.ceil(prompt_tokens_of(body) * self.margin)
        wanted = self.reply_budget(call.reply_tokens)  # the window may have changed since the last try
        return None if room < min(wanted, MIN_REPLY) else min(wanted, room)

    def _ask(
        self, call: _Call, schema: type[BaseModel], extra: list[ChatCompletionMessageParam], usage: Usage
    ) -> Answer:
        while True:
            tried = self.output_mode
            body = self._body(call.system, call.user, schema, call.name, extra)
            estimate = prompt_tokens_of(body)
            budget = self._budget(body, call)
            if budget is None:
                raise WindowTooSmall(
                    f"a prompt of about {estimate} tokens leaves no room for a reply "
                    f"in {self.model}'s window of {self.context_window} tokens"
                )
            try:
                answer = self._send_with_retries(body, budget, usage, call.tries)
            except openai.APIStatusError as exc:
                if self._switched(exc, tried) or self._shrunk(exc):
                    continue
                raise rejected(exc) from exc
            self._learn(estimate, answer.prompt_tokens)
            return answer

    def _switched(self, exc: openai.APIStatusError, tried: OutputMode) -> bool:
        """Move on from `tried`, the mode `exc` refuses (unless the mode is forced). Threads that
        share the client and were refused together move it on once: a later one finds the mode
        moved already and tries again in it."""
        if self.forced or not rejects_format(exc):
            return False
        with self._lock:
            if self.output_mode != tried:
                return True
            nxt = next_mode(tried)
            if nxt is None:
                return False
            log.warning("%s refuses the %s output mode (%s); trying %s", self.model, tried, error_text(exc)[:200], nxt)
            self.output_mode = nxt
        return True

    def _shrunk(self, exc: openai.APIStatusError) -> bool:
        """Take the smaller window a context-overflow error names, so the request is fitted again."""
        window = window_from_error(error_text(exc)) if exc.status_code in (400, 413, 422) else None
        with self._lock:
            if window is None or window >= self.context_window:
                return False
            log.warning("%s says its window is %d tokens, not %d", self.model, window, self.context_window)
            self.context_window = window
        return True

    def _learn(self, estimate: int, reported: int | None) -> None:
        """Tell the mode that answered once; take the endpoint's own count of a prompt as the margin."""
        if self._told != self.output_mode:
            self._told = self.output_mode
            if self._on_mode is not None:
                self._on_mode(self.output_mode)
        if reported and estimate:  # a tokenizer counts within half again of ours; more is a server's own figure
            with self._lock:
                self.margin = min(MAX_MARGIN, max(self.margin, reported / estimate * 1.05))

    def _body(
        self, system: str, user: str, schema: type[BaseModel], name: str, extra: list[ChatCompletionMessageParam]
    ) -> _Body:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": system_prompt(self.output_mode, system, schema)},
            {"role": "user", "content": user},
            *extra,
        ]
        body: _Body = {"messages": messages}
        fmt = response_format(self.output_mode, schema, name)
        if fmt is not None:
            body["response_format"] = fmt
        return body

    # --- one request, retried -----------------------------------------------------
    def _send_with_retries(self, body: _Body, budget: int, usage: Usage, tries: int) -> Answer:
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_transient),
            stop=tenacity.stop_after_attempt(tries),
            wait=self._wait,
            sleep=self._sleep,
            before_sleep=log_retry,
            retry_error_callback=give_up,
        )
        return retrying(self._send_once, body, budget, usage)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return retry_delay(
            state.attempt_number,
            base=self.retry_base,
            cap=self.retry_cap,
            retry_after=retry_after_of(exc),
            rand=self._rand(),
        )

    def _send_once(self, body: _Body, budget: int, usage: Usage) -> Answer:
        usage.requests += 1

        def create(limit: float) -> Any:
            return self.client.chat.completions.create(
                model=self.model, temperature=self.temperature, max_tokens=budget, timeout=limit, **body
            )

        try:
            timeout = seconds_of(self.client.timeout, REMOTE_TIMEOUT)
            completion = send_within(create, timeout, prompt_tokens_of(body), usage)
        except json.JSONDecodeError as exc:
            return Answer(None, f"response body is not JSON ({json_reason(exc, f'character {exc.pos}')})")
        except openai.APIResponseValidationError as exc:
            return Answer(None, f"response body is not a chat completion ({exc.message})")
        if not isinstance(completion, ChatCompletion):
            return Answer(None, "response body is not a chat completion")
        reported = add_usage(usage, completion)
        answer = answer_of(completion)
        answer.prompt_tokens = reported
        if answer.cut:
            usage.notes.append(f"reply cut at its budget of {budget} tokens: read up to its last complete item")
        return answer


_Body = dict[str, Any]  # messages, and response_format unless the mode sends none


@dataclass(frozen=True)
class _Call:
    system: str
    user: str
    name: str
    reply_tokens: int | None  # what the caller wants (None: the client's own)
    tries: int


# --- construction -------------------------------------------------------------------

LOCAL_TIMEOUT = 300.0  # seconds: a model on a CPU next to the process writes slowly
REMOTE_TIMEOUT = 60.0
LOCAL_HOSTS = ("localhost", "127.", "[::1]", "0.0.0.0", "host.docker.internal")


def request_timeout(settings: Settings, learnt: float | None = None) -> float:
    """`llm_timeout` when set; else what `dreamer llm check` learnt for the endpoint; else a
    default that suits where the endpoint is (a local model on a CPU is given longer)."""
    if settings.llm_timeout > 0:
        return settings.llm_timeout
    if learnt:
        return learnt
    return LOCAL_TIMEOUT if is_local(settings.llm_base_url) else REMOTE_TIMEOUT


def is_local(base_url: str) -> bool:
    """Whether the endpoint runs on this machine (or its container host)."""
    return base_url.split("://", 1)[-1].startswith(LOCAL_HOSTS)


def build_openai_client(settings: Settings, timeout: float | None = None) -> openai.OpenAI:
    """The openai client for `settings`, with its own retries off (``max_retries=0``); its timeout
    `request_timeout` (a set `llm_timeout` wins over the `timeout` learnt for the endpoint).

    `OpenAILLM` owns the retry policy (backoff, Retry-After, error mapping); leaving the
    client's built-in retries on would multiply attempts and hide them from the counts.
    """
    return openai.OpenAI(
        base_url=settings.llm_base_url,
        api_key=settings.llm_api_key or "none",
        timeout=request_timeout(settings, timeout),
        max_retries=0,
    )


def build_llm(
    settings: Settings,
    *,
    output_mode: OutputMode | None = None,
    context_window: int | None = None,
    timeout: float | None = None,
    on_mode: Callable[[OutputMode], None] | None = None,
) -> OpenAILLM | None:
    """An `OpenAILLM` for the configured endpoint, or None when no endpoint is set. `output_mode` and
    `context_window` are what is known of the endpoint (remembered, or asked of it); a setting
    forces either."""
    if not settings.llm_base_url:
        return None
    forced = as_mode(settings.llm_output_mode)
    return OpenAILLM(
        build_openai_client(settings, timeout),
        model=settings.llm_model,
        max_retries=settings.llm_max_retries,
        retry_base=settings.llm_retry_base,
        retry_cap=settings.llm_retry_cap,
        output_mode=forced or output_mode,
        forced=forced is not None,
        context_window=settings.llm_context_window or context_window or DEFAULT_WINDOW,
        reply_tokens=settings.llm_reply_tokens,
        on_mode=on_mode,
    )
