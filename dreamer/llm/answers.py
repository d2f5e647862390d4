"""One reply of a model: its content as the client reads it (cut at its budget, refused,
empty), the usage it reports, and the repair request that follows a reply with nothing valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import BaseModel

from dreamer.llm.salvage import Salvaged, salvage
from dreamer.llm.usage import Usage

M = TypeVar("M", bound=BaseModel)

REPAIR_PROMPT = (
    "Your previous reply was not valid: {problem}. "
    "Reply again with only the corrected JSON object, matching the required schema."
)


@dataclass
class Answer:
    """The assistant's content, whether it was cut at its budget, or why there is none."""

    content: str | None
    problem: str | None = None
    cut: bool = False
    prompt_tokens: int | None = None


def add_usage(usage: Usage, completion: ChatCompletion) -> int | None:
    """Add the completion's reported usage; its prompt tokens (None when it reports none)."""
    reported = getattr(completion, "usage", None)
    if reported is None:
        return None
    usage.prompt_tokens += reported.prompt_tokens or 0
    usage.completion_tokens += reported.completion_tokens or 0
    return reported.prompt_tokens or None


def answer_of(completion: ChatCompletion) -> Answer:
    choices = getattr(completion, "choices", None) or []
    if not choices:
        return Answer(None, "no choices in the response")
    choice = choices[0]
    message = choice.message
    if getattr(message, "refusal", None):
        return Answer(None, f"the model refused: {message.refusal}")
    if not message.content:
        return Answer(None, "empty content" if choice.finish_reason != "length" else "reply cut before any content")
    return Answer(message.content, cut=choice.finish_reason == "length")


def read_answer(schema: type[M], answer: Answer, usage: Usage) -> Salvaged[M]:
    """The answer read as far as it is valid; its dropped items told in `usage`."""
    if answer.content is None:
        return Salvaged(None, problem=answer.problem or "empty content")
    got = salvage(schema, answer.content)
    usage.dropped += got.dropped
    if got.empty_handed and answer.cut:
        got.problem = "output truncated (finish_reason=length) before a complete item" + (
            f": {got.problem}" if got.problem else ""
        )
    return got


def repair_messages(answer: Answer, problem: str) -> list[ChatCompletionMessageParam]:
    messages: list[ChatCompletionMessageParam] = []
    if answer.content:
        messages.append({"role": "assistant", "content": answer.content})
    messages.append({"role": "user", "content": REPAIR_PROMPT.format(problem=problem)})
    return messages
