"""The consolidation judge: does a new statement restate, update, contradict or sit beside a
stored one? Pairs go in one batch; verdicts come back in pair order.

`Judge` is the interface planning uses; `LLMJudge` asks a model once per batch, each pair
carrying both statements with their kind, topic and date. The model's instructions are the
judge card, rendered once as `JUDGE_SYSTEM`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Annotated, Protocol, TypeVar

from pydantic import BaseModel, Field

from dreamer.core.consolidate import Verdict
from dreamer.core.tokens import count_tokens
from dreamer.llm.cards import render_card
from dreamer.llm.client import LLM, Usage

T = TypeVar("T")
VERDICTS: tuple[Verdict, ...] = ("same", "update", "contradicts", "new")


@dataclass(frozen=True)
class Statement:
    """One side of a pair: a stored memory (its id) or a candidate of this batch (`pending:<n>`)."""

    memory_id: str
    text: str
    kind: str
    topic: str | None = None
    said: date | None = None


@dataclass(frozen=True)
class JudgePair:
    """OLD and NEW, with what the store read between them without a model (`grounds`: "someone
    else's, not the user's", "an ending of what it mentions" ...), shown on NEW's line."""

    old: Statement
    new: Statement
    grounds: str | None = None


@dataclass
class JudgeResult:
    """One verdict per pair, in pair order (None: the judge gave none, or more than one)."""

    verdicts: list[Verdict | None]
    usage: Usage = field(default_factory=Usage)


class Judge(Protocol):
    name: str

    def judge(self, pairs: list[JudgePair]) -> JudgeResult: ...


PairNumber = Annotated[int, Field(ge=0)]


class Judgements(BaseModel):
    """The pair numbers filed under each verdict (short to write)."""

    same: list[PairNumber] = Field(default_factory=list, description="the pairs whose NEW restates OLD")
    update: list[PairNumber] = Field(default_factory=list, description="the pairs whose NEW replaces or refines OLD")
    contradicts: list[PairNumber] = Field(default_factory=list, description="the pairs that cannot both be true now")
    new: list[PairNumber] = Field(default_factory=list, description="the pairs that are different facts")


JUDGE_SYSTEM = render_card("judge", Judgements)  # the judge card (dreamer/llm/cards/judge.md)


def render_pairs(pairs: list[JudgePair]) -> str:
    """``n. (kind, topic, day) old`` then ``-> (kind, topic, day; read: grounds) new``, one line each; a
    statement's own line breaks are flattened, so no statement can start a pair of its own."""
    return "\n".join(f"{i}. {_line(p.old)}\n-> {_line(p.new, p.grounds)}" for i, p in enumerate(pairs))


def _line(st: Statement, grounds: str | None = None) -> str:
    about = [st.kind, f"topic {st.topic}" if st.topic else "", st.said.isoformat()[:10] if st.said else ""]
    read = f"; read: {' '.join(grounds.split())}" if grounds else ""
    return f"({', '.join(a for a in about if a)}{read}) {' '.join(st.text.split())}"


def verdicts_by_pair(result: Judgements, n: int) -> list[Verdict | None]:
    """The verdict of each of the `n` pairs: None for a pair not filed, or filed under two verdicts."""
    filed: list[set[Verdict]] = [set() for _ in range(n)]
    for verdict in VERDICTS:
        for pair in getattr(result, verdict):
            if pair < n:
                filed[pair].add(verdict)
    return [next(iter(v)) if len(v) == 1 else None for v in filed]


class LLMJudge:
    """Judges a batch of pairs in one structured call to a model; its errors propagate (the
    session's cursor then stays where it was)."""

    def __init__(self, llm: LLM) -> None:
        self.llm = llm
        self.name = f"llm:{llm.name}"

    def judge(self, pairs: list[JudgePair]) -> JudgeResult:
        out = JudgeResult([])
        for batch in self._batches(pairs):
            result, usage = self.llm.complete_json(
                system=JUDGE_SYSTEM,
                user=render_pairs(batch),
                schema=Judgements,
                name="judgements",
                reply_tokens=judge_reply_budget(len(batch)),
            )
            out.verdicts += verdicts_by_pair(result, len(batch))
            out.usage.add(usage)
        return out

    def _batches(self, pairs: list[JudgePair]) -> list[list[JudgePair]]:
        """The pairs in batches that each fit the model's window with their reply."""
        room = self.llm.room(JUDGE_SYSTEM, Judgements, judge_reply_budget(len(pairs)))
        return fit_batches([count_tokens(render_pairs([p])) + 1 for p in pairs], room, pairs)


def judge_reply_budget(pairs: int) -> int:
    """The reply budget of a judge call over `pairs` pairs (each number filed once)."""
    return 64 + 8 * max(pairs, 1)


def fit_batches(sizes: list[int], room: int, items: list[T]) -> list[list[T]]:
    """`items` in order, in batches whose `sizes` add up to at most `room` (an item larger than
    `room` goes alone)."""
    batches: list[list[T]] = []
    used = room + 1
    for size, item in zip(sizes, items):
        if used + size > room:
            batches.append([])
            used = 0
        batches[-1].append(item)
        used += size
    return batches
