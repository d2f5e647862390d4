"""The summary step of a compaction: one call with the `compact` card over the earlier part of
a long task, through the runtime's model (billed and guarded as every call), its answer checked.

An answer that is empty, or that the model could not give validly, is no summary: the caller
then keeps the old segment as it was.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from dreamer.core.compaction.plan import fit_entries, history_entries
from dreamer.core.compaction.policy import Msg
from dreamer.core.errors import LLMError
from dreamer.llm.cards import render_card
from dreamer.llm.client import LLM, Usage

log = logging.getLogger(__name__)

HISTORY_FRAME = 8  # the <history> tags around the lines


class CompactSummary(BaseModel):
    summary: str = Field(description="the task and where it stands, briefly; empty when nothing")
    ids: list[str] = Field(default_factory=list, description="every id, number or value still needed, verbatim")
    files: list[str] = Field(default_factory=list, description="every file, path or URL read, changed or to change")
    errors: list[str] = Field(default_factory=list, description="each error met, verbatim, and whether it was solved")
    pending_steps: list[str] = Field(default_factory=list, description="the steps not done yet, in order")
    decisions: list[str] = Field(default_factory=list, description="decisions made, each with its reason")
    constraints: list[str] = Field(default_factory=list, description="the user's constraints, in their own words")
    dropped: str = Field("", description="what the summary leaves out, in one sentence")


def compact_prompt() -> str:
    """The system prompt of the summary call."""
    return render_card("compact", CompactSummary)


@dataclass
class Summary:
    """The summary text (None when there is none to use), why not, and what the call cost."""

    text: str | None
    usage: Usage
    calls: int
    problem: str | None = None
    dropped: str = ""


def summarise(
    llm: LLM | None, earlier: Sequence[Msg], names: dict[str, str], tool_chars: int, reply_tokens: int
) -> Summary:
    """One call over `earlier`; its answer checked (`checked`) and rendered (`rendered`)."""
    if llm is None:
        return Summary(None, Usage(), 0, "no model is configured to summarise with")
    system = compact_prompt()
    room = llm.room(system, CompactSummary, reply_tokens) - HISTORY_FRAME
    history = "\n".join(fit_entries(history_entries(earlier, names, tool_chars), room))
    try:
        parsed, usage = llm.complete_json(
            system=system,
            user=f"<history>\n{history}\n</history>",
            schema=CompactSummary,
            name="compact_summary",
            reply_tokens=reply_tokens,
        )
    except LLMError as exc:  # an invalid answer, a refusal, an open breaker, a spent budget
        log.warning("compaction summary failed: %s", exc)
        return Summary(None, getattr(exc, "usage", None) or Usage(), 1, f"the summary call failed: {exc}")
    answer, problem = checked(parsed, history)
    if answer is None:
        return Summary(None, usage, 1, problem)
    return Summary(rendered(answer), usage, 1, None, answer.dropped.strip())


def _said(text: str, history: str) -> bool:
    return re.sub(r"\s+", " ", text.strip().lower()) in re.sub(r"\s+", " ", history.lower())


MIN_SHARED = 0.3  # of a summary's words, the share the history must hold
_WORD = re.compile(r"[^\W\d_]{4,}")


def _shared(answer: CompactSummary, history: str) -> float:
    """The share of the summary's words (four letters or more) that the history holds."""
    said = {w.lower() for w in _WORD.findall(history)}
    text = " ".join([answer.summary, *answer.errors, *answer.pending_steps, *answer.decisions, *answer.constraints])
    words = [w.lower() for w in _WORD.findall(text)]
    return sum(w in said for w in words) / len(words) if words else 1.0


def checked(answer: CompactSummary, history: str) -> tuple[CompactSummary | None, str | None]:
    """The answer with ids and files the history never names left out; None with why when it is empty or
    does not rest on the history (fewer than `MIN_SHARED` of its words are in it)."""
    ids = [i.strip() for i in answer.ids if i.strip() and _said(i, history)]
    files = [f.strip() for f in answer.files if f.strip() and _said(f, history)]
    kept = answer.model_copy(update={"ids": list(dict.fromkeys(ids)), "files": list(dict.fromkeys(files))})
    if not kept.summary.strip() and not kept.pending_steps and not kept.ids:
        return None, "the summary is empty"
    if _shared(kept, history) < MIN_SHARED:
        return None, "the summary does not rest on the history: too few of its words were said"
    return kept, None


def rendered(answer: CompactSummary) -> str:
    """The summary as the text the new segment carries."""
    parts = [answer.summary.strip()]
    if answer.ids:
        parts.append("Ids: " + ", ".join(answer.ids))
    if answer.files:
        parts.append("Files: " + ", ".join(answer.files))
    for title, items in (
        ("Errors", answer.errors),
        ("Pending steps", answer.pending_steps),
        ("Decisions", answer.decisions),
        ("User constraints", answer.constraints),
    ):
        kept = [i.strip() for i in items if i.strip()]
        if kept:
            parts.append(f"{title}:\n" + "\n".join(f"- {i}" for i in kept))
    if answer.dropped.strip():
        parts.append(f"Dropped: {answer.dropped.strip()}")
    return "\n".join(p for p in parts if p)
