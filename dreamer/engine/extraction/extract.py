"""Extraction: transcript chunks in, validated memory candidates out.

The candidates' schema, the interface extractors share, and `LLMExtractor` (structured
output from any OpenAI-compatible model); `rules.RulesExtractor` states explicit statements
only, and its triage keeps empty chunks away from the model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from dreamer.core.consolidate import content_hash
from dreamer.core.errors import WindowTooSmall
from dreamer.core.models import AGENT_KINDS, CODE_KINDS
from dreamer.core.topics import Cardinality, normalise_topic
from dreamer.engine.extraction.transcript import Chunk, render_lessons, render_transcript
from dreamer.llm.cards import render_card
from dreamer.llm.client import LLM, Usage

Kind = Literal[
    "preference",
    "profile",
    "focus",
    "root_cause",
    "interface_behavior",
    "design_decision",
    "decision",
    "lesson",
    "expertise",
    "context",
]


Sentence = Annotated[
    str,
    Field(min_length=3, max_length=600, description="one self-contained sentence"),
    AfterValidator(lambda value: " ".join(value.split())),
]


def _evidence_required(schema: dict[str, Any]) -> None:
    """The schema a model is shown asks for `seqs` on every item: a grammar built from it (llama.cpp)
    then makes the model cite its lines. Reading an answer stays lenient (`_anchor`)."""
    schema["required"] = [*schema.get("required", []), "seqs"]


class Item(BaseModel):
    """One thing worth keeping as the model states it; its kind is the list it is in."""

    model_config = ConfigDict(json_schema_extra=_evidence_required)

    text: Sentence = Field(description="one sentence that stands alone, naming its subject")
    seqs: list[int] = Field(default_factory=list, description="the [n] of the new lines it rests on")
    importance: float = Field(0.5, ge=0.0, le=1.0, description="by the rubric above")
    tags: list[str] = Field(default_factory=list, max_length=8, description="words to file it under")
    topic: Annotated[str | None, AfterValidator(normalise_topic)] = Field(
        default=None,
        description="the slot it fills, a snake_case key kept when the value changes (home_city, employer, "
        "deadline:<thing>); null if none fits",
    )
    cardinality: Cardinality | None = Field(
        default=None, description="one: a new value replaces the old; many: values add up (hobbies)"
    )


Basis = Literal["observed", "confirmed", "inferred"]
INFERRED = "inferred"  # the tag a code memory resting on a guess is stored with


class CodeItem(Item):
    """A code-mode item, with what it rests on (a guess is stored tagged `inferred`), when it
    holds, and the known lesson it shows failing, if any (by its label: `transcript.lesson_label`)."""

    basis: Basis = Field(
        "observed",
        description="what it rests on, as above",
    )
    text: Sentence = Field(description="one sentence that stands alone, naming the file, function or service")
    topic: Annotated[str | None, AfterValidator(normalise_topic)] = Field(
        default=None, description="the slot it fills, as above; null if none"
    )
    cardinality: Cardinality | None = Field(
        default=None, description="one: a new value replaces the old; many: values add up"
    )
    conditions: list[str] = Field(default_factory=list, description="when it holds, as above")
    counters: str | None = Field(None, description="the label of a lesson it shows failing, else null")


class Candidate(Item):
    """One thing worth keeping, as the extractor states it, with its kind."""

    kind: Kind
    # Set by `mark_untrusted` after extraction, never taken from the model (not in its schema).
    untrusted: SkipJsonSchema[bool] = False
    untrusted_reason: SkipJsonSchema[str | None] = None  # why, as `mark_untrusted` found it
    # Why it does not rest on what was said, set by `engine.grounding.ground`: it is rejected.
    ungrounded: SkipJsonSchema[str | None] = None
    # A code item's basis and conditions, and the id of the known lesson it counters (its label
    # mapped back by `LLMExtractor`): what `engine.code_dream` proposes experience entries from.
    basis: SkipJsonSchema[Basis | None] = None
    conditions: SkipJsonSchema[list[str]] = Field(default_factory=list)
    counters: SkipJsonSchema[str | None] = None


class AnswerBase(BaseModel):
    """The model's answer: one list per kind, so no entry spells out its kind (about an eighth
    of the answer's tokens). An answer in the earlier one-list shape (`memories`, each entry
    with its kind) is read too; it is not in the schema the model is shown."""

    memories: SkipJsonSchema[list[Candidate]] = Field(default_factory=list)

    def candidates(self) -> list[Candidate]:
        """Every entry as a candidate, kind by kind in the schema's order, then the one-list entries."""
        grouped = [
            _candidate(cast(Kind, kind), item)  # each list is named by its kind
            for kind in type(self).model_fields
            if kind != "memories"
            for item in getattr(self, kind)
        ]
        return grouped + list(self.memories)


def _candidate(kind: Kind, item: Item) -> Candidate:
    """The item as a candidate of `kind`; a code item resting on a guess tagged `inferred` first."""
    data = item.model_dump()
    if getattr(item, "basis", None) == INFERRED:
        data["tags"] = [INFERRED, *(t for t in data["tags"] if t != INFERRED)][:8]
    return Candidate(kind=kind, **data)


class AgentAnswer(AnswerBase):
    preference: list[Item] = Field(
        default_factory=list,
        description="what the user likes, dislikes or wants done a certain way",
    )
    profile: list[Item] = Field(
        default_factory=list,
        description="lasting facts of the user's life: work, home, family, health, past events",
    )
    focus: list[Item] = Field(
        default_factory=list, description="the user's goals, plans and ongoing projects, with their dates"
    )


class CodeAnswer(AnswerBase):
    root_cause: list[CodeItem] = Field(default_factory=list, description="the real cause of a bug, and its fix")
    interface_behavior: list[CodeItem] = Field(
        default_factory=list, description="how an API, tool or function behaves at its edges (limits, errors)"
    )
    design_decision: list[CodeItem] = Field(default_factory=list, description="a choice made, and why")


@dataclass
class ExtractResult:
    candidates: list[Candidate] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    unanchored: list[Candidate] = field(default_factory=list)  # citing no line the call showed: rejected


class Extractor(Protocol):
    name: str

    def extract(self, chunk: Chunk, mode: str) -> ExtractResult: ...


# --------------------------------------------------------------------------- LLM extractor

EXTRACTION_CARDS: dict[str, tuple[str, type[AnswerBase]]] = {
    "agent": ("extract_agent", AgentAnswer),
    "code": ("extract_code", CodeAnswer),
}


def extraction_card(mode: str) -> tuple[str, type[AnswerBase]]:
    """The card and answer schema of `mode` (agent for anything but code)."""
    return EXTRACTION_CARDS["code" if mode == "code" else "agent"]


def extraction_prompt(mode: str, limit: int, *, examples: bool = True) -> str:
    """The system prompt of an extraction call: the mode's card, asking for at most `limit` items
    (the lean card, without its worked examples, unless `examples`)."""
    card, schema = extraction_card(mode)
    return render_card(card, schema, examples=examples, limit=limit)


REPLY_BASE = 48  # tokens of an answer's frame
REPLY_PER_ITEM = 96  # tokens one item takes at most, written out (a sentence, seqs, tags, topic)
MIN_TRANSCRIPT = 128  # tokens of transcript a call must be able to carry, or the card does not fit
LEAN_BELOW = 1_024  # tokens of transcript under which a call sends the card without its worked examples


def reply_budget(limit: int) -> int:
    """The reply budget of an extraction call asking for at most `limit` items."""
    return REPLY_BASE + REPLY_PER_ITEM * max(limit, 1)


class LLMExtractor:
    """Structured extraction through an `LLM`."""

    def __init__(self, llm: LLM, *, limit: int) -> None:
        self.llm = llm
        self.limit = limit
        self.name = f"llm:{llm.name}"

    def lean(self, mode: str) -> bool:
        """Whether the model's window is small enough that calls send the lean card: the full one
        would leave less than `LEAN_BELOW` tokens of transcript."""
        _, schema = extraction_card(mode)
        return self.llm.room(extraction_prompt(mode, self.limit), schema, reply_budget(self.limit)) < LEAN_BELOW

    def chunk_tokens(self, mode: str, wanted: int) -> int:
        """The transcript tokens one call may carry: `wanted`, or less where the model's window
        holds less beside the card, its schema and the reply budget of one session's items.
        Raises `WindowTooSmall` when not even `MIN_TRANSCRIPT` fits."""
        _, schema = extraction_card(mode)
        card = extraction_prompt(mode, self.limit, examples=not self.lean(mode))
        room = self.llm.room(card, schema, reply_budget(self.limit))
        if room < MIN_TRANSCRIPT:
            raise WindowTooSmall(
                f"the {mode} extraction card (without its examples), its schema and a reply "
                f"leave {room} tokens of the model's window for the transcript (at least {MIN_TRANSCRIPT} "
                "needed): use a model with a larger window, or set DREAMER_LLM_CONTEXT_WINDOW if it has one"
            )
        return min(wanted, room)

    def extract(self, chunk: Chunk, mode: str) -> ExtractResult:
        limit = self.limit * chunk.sessions
        _, schema = extraction_card(mode)
        user = render_lessons(chunk.lessons) + render_transcript(chunk.lines)
        parsed, usage = self.llm.complete_json(
            system=extraction_prompt(mode, limit, examples=not self.lean(mode)),
            user=user,
            schema=schema,
            name="memories",
            reply_tokens=reply_budget(limit),
        )
        allowed = set(CODE_KINDS if mode == "code" else AGENT_KINDS)
        valid_seqs = set(chunk.seqs)
        out = [_anchor(_countered(c, chunk), valid_seqs) for c in parsed.candidates() if c.kind in allowed]
        kept = collapse_duplicates([c for c in out if c.seqs])
        ranked = sorted(kept, key=lambda c: -c.importance)  # stable: the answer's order among equals, not its kinds'
        return ExtractResult(candidates=ranked[:limit], usage=usage, unanchored=[c for c in out if not c.seqs])


def check_fits(extractor: LLMExtractor) -> None:
    """Raise `WindowTooSmall` unless both extraction cards fit the model's window with a transcript."""
    for mode in EXTRACTION_CARDS:
        extractor.chunk_tokens(mode, MIN_TRANSCRIPT)


def collapse_duplicates(candidates: list[Candidate]) -> list[Candidate]:
    """One candidate per content hash, in first-seen order: the message numbers of every
    repetition are kept, with the highest importance, the tags of all, untrusted if any was, and
    ungrounded only if every one was."""
    merged: dict[str, Candidate] = {}
    for cand in candidates:
        key = content_hash(cand.text)
        first = merged.get(key)
        if first is None:
            merged[key] = cand
            continue
        merged[key] = first.model_copy(
            update={
                "seqs": sorted(set(first.seqs) | set(cand.seqs)),
                "importance": max(first.importance, cand.importance),
                "tags": list(dict.fromkeys(first.tags + cand.tags))[:8],
                "untrusted": first.untrusted or cand.untrusted,
                "untrusted_reason": first.untrusted_reason or cand.untrusted_reason,
                "ungrounded": first.ungrounded if cand.ungrounded else None,
            }
        )
    return list(merged.values())


_LABEL = re.compile(r"\s*L?(\d+)\s*", re.I)


def _countered(cand: Candidate, chunk: Chunk) -> Candidate:
    """The candidate with the label of the lesson it counters mapped back to that entry's id;
    a label the chunk did not show (or none) is no lesson."""
    m = _LABEL.fullmatch(cand.counters or "")
    k = int(m.group(1)) - 1 if m else -1
    entry = chunk.lessons[k].entry_id if 0 <= k < len(chunk.lessons) else None
    return cand.model_copy(update={"counters": entry})


def _anchor(cand: Candidate, valid: set[int]) -> Candidate:
    """Keep only the seqs that are really in the chunk's new lines."""
    seqs = sorted({s for s in cand.seqs if s in valid})
    if not seqs and len(valid) == 1:
        seqs = sorted(valid)
    return cand.model_copy(update={"seqs": seqs})
