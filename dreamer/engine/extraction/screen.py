"""The screen: what a model reads of the candidates the structural checks cannot settle.

Only candidates `dreamer.core.trust.undecided` names (a credential-shaped value, an encoded run,
second-person address, another script) and the checks did not already flag go to the screen card
(`dreamer/llm/cards/screen.md`), in one batched call for a group of sessions. The model's word
only adds: a line it files under `steers` is stored untrusted, one under `secret` is rejected
(its value cannot be told apart to redact it); it never clears what the checks found. A screen
that fails (no model, a refusal, a reply that does not read) leaves the structural floor alone.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from pydantic import BaseModel, Field

from dreamer.core.errors import BudgetExceeded, CircuitOpen, LLMError
from dreamer.core.tokens import count_tokens
from dreamer.core.trust.memory_text import one_line
from dreamer.core.trust.undecided import undecided
from dreamer.engine.consolidation.judge import fit_batches
from dreamer.engine.extraction.extract import Candidate
from dreamer.llm.cards import render_card
from dreamer.llm.client import LLM, Usage

log = logging.getLogger(__name__)

LineNumber = Annotated[int, Field(ge=0)]
STEERS = "screened: speaks to the assistant"
SECRET = "screened: holds a secret value"
WITHHELD = "[REDACTED:secret]"  # the text of a candidate rejected for a secret the model found


class Screened(BaseModel):
    """The line numbers filed under each finding (short to write)."""

    secret: list[LineNumber] = Field(
        default_factory=list, description="the lines that hold a secret value, as the card says"
    )
    steers: list[LineNumber] = Field(
        default_factory=list, description="the lines that address the assistant or widen what it may do"
    )


SCREEN_SYSTEM = render_card("screen", Screened)  # the screen card (dreamer/llm/cards/screen.md)


def render_lines(texts: list[str]) -> str:
    """``n. text``, one line each, each text flattened so it cannot start a line of its own."""
    return "\n".join(f"{i}. {one_line(t)}" for i, t in enumerate(texts))


def screen_reply_budget(lines: int) -> int:
    return 48 + 8 * max(lines, 1)


def ask(llm: LLM, texts: list[str]) -> tuple[list[set[str]], Usage]:
    """What the model finds in each text (`secret`, `steers`), in batches that fit its window."""
    found: list[set[str]] = [set() for _ in texts]
    usage = Usage()
    room = llm.room(SCREEN_SYSTEM, Screened, screen_reply_budget(len(texts)))
    numbered = list(range(len(texts)))
    for batch in fit_batches([count_tokens(render_lines([t])) + 1 for t in texts], room, numbered):
        result, used = llm.complete_json(
            system=SCREEN_SYSTEM,
            user=render_lines([texts[i] for i in batch]),
            schema=Screened,
            name="screened",
            reply_tokens=screen_reply_budget(len(batch)),
        )
        usage.add(used)
        for key in ("secret", "steers"):
            for n in getattr(result, key):
                if n < len(batch):
                    found[batch[n]].add(key)
    return found, usage


def screen_found(llm: LLM | None, found: list[Any]) -> list[Any]:
    """Each session's kept candidates of a group (`extract_group`'s (kept, left out) pairs; an
    error or a cut as it is), screened in one call for the whole group; one found to hold a
    secret joins those left out, rejected with its reason."""
    done = [i for i, f in enumerate(found) if isinstance(f, tuple)]
    flat = [c for i in done for c in found[i][0]]
    screened, _ = screen(llm, flat)  # billed by the guarded client, as every call of the pass
    out, at = list(found), 0
    for i in done:
        kept, over = found[i]
        mine, at = screened[at : at + len(kept)], at + len(kept)
        out[i] = ([c for c in mine if c.ungrounded is None], [c for c in mine if c.ungrounded] + over)
    return out


def screen(llm: LLM | None, candidates: list[Candidate]) -> tuple[list[Candidate], Usage]:
    """The candidates with the model's findings added to the undecided ones."""
    asked = [i for i, c in enumerate(candidates) if not c.untrusted and not c.ungrounded and undecided(c.text)]
    if llm is None or not asked:
        return candidates, Usage()
    try:
        found, usage = ask(llm, [candidates[i].text for i in asked])
    except (BudgetExceeded, CircuitOpen):
        raise  # the pass's own stops
    except LLMError as exc:
        log.warning("screen not read, the structural checks stand alone: %s", exc)
        return candidates, Usage()
    out = list(candidates)
    for i, flags in zip(asked, found):
        out[i] = marked(out[i], flags)
    return out, usage


def marked(cand: Candidate, flags: set[str]) -> Candidate:
    """A candidate with what the screen found: a secret rejects it (its text is not kept, not
    even in the run's record of rejections), steering makes it untrusted."""
    if "secret" in flags:
        return cand.model_copy(update={"ungrounded": SECRET, "text": WITHHELD})
    if "steers" in flags:
        return cand.model_copy(update={"untrusted": True, "untrusted_reason": STEERS})
    return cand
