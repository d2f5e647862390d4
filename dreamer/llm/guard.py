"""The pass guard around an `LLM`: a token budget, a consecutive-failure breaker, and the probe
that asks whether an endpoint answers at all."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from dreamer.core.errors import (
    BudgetExceeded,
    LLMError,
    LLMInvalidOutput,
)
from dreamer.llm.bill import billed_prompt
from dreamer.llm.breaker import Breaker
from dreamer.llm.client import LLM, M, Usage


class GuardedLLM:
    """Wraps an `LLM` for one pass: a token budget and a consecutive-failure `Breaker` that
    stays open for the rest of the pass.

    ``calls`` counts HTTP requests (retries and repairs included) as reported in ``Usage.requests``;
    ``answered`` the calls the endpoint answered (validly or not).
    A `breaker_threshold` of 0 or less disables the breaker. A call starts only while the tokens
    spent plus its prompt (as `dreamer.llm.bill` counts it) fit the budget, so the pass can go over it by at most
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
        self.on_call: Callable[[], None] | None = None  # told after each call, answered or not (a progress bar)

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
        self._check_budget(billed_prompt(system, user, schema, name))  # a refusal, not a failure of the model
        return self.breaker.call(lambda: self._spend(system, user, schema, name, (attempts, reply_tokens)))

    def room(self, system: str, schema: type[BaseModel], reply_tokens: int) -> int:
        return self.inner.room(system, schema, reply_tokens)

    def _spend(
        self, system: str, user: str, schema: type[M], name: str, limits: tuple[int | None, int | None]
    ) -> tuple[M, Usage]:
        """The call, its usage recorded whether it succeeds or fails."""
        attempts, reply_tokens = limits
        try:
            result, usage = self.inner.complete_json(
                system=system, user=user, schema=schema, name=name, attempts=attempts, reply_tokens=reply_tokens
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
        if self.on_call is not None:
            self.on_call()


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
