"""Untrusted text: steering text in a memory or the lines it rests on, or (agent mode) a fact
about the user no line of theirs supports. One rule for every write: a dreamed candidate or a
flushed note so found is stored flagged untrusted (never verified, never injected), an agent's
write is refused.

What counts as steering is `dreamer.core.trust.steering`'s one pure check, which every path asks (a
dream pass, a flush, an agent write over HTTP or MCP): it reads text as a reader would see it
and before anything is stripped from it, so a stray or look-alike closing tag stays as
evidence. Here it is applied to a candidate or note and to the lines it rests on."""

from __future__ import annotations

import logging
from typing import Any

from dreamer.core.secrets.redact import PREFIX_MARGIN
from dreamer.core.trust.admit import admit
from dreamer.core.trust.steering import steering_markers
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.extraction.transcript import Line

log = logging.getLogger(__name__)


def injection_markers(text: str, *, line: bool = False, role: str | None = None) -> list[str]:
    """The names of the steering shapes found in `text` (`dreamer.core.trust.steering`: the one check
    every path asks), a memory's text or (`line`) a transcript line it rests on, said by `role`.
    The check is the same for every speaker but one shape: an assistant saying what it will
    remember about the user ("I'll remember that the user prefers tabs") keeps its own notes,
    it does not order the memory about."""
    found = steering_markers(text, line=line)
    return [f for f in found if f != "memory_command"] if line and role == "assistant" else found


def message_steering(content: str, role: str, mode: str, tool_chars: int) -> tuple[str, ...]:
    """The steering patterns in a stored message as it was said, before its injected blocks are
    stripped (of a tool's output, the part a transcript shows); kept on its transcript line."""
    text = content[: tool_chars + PREFIX_MARGIN] if role == "tool" else content
    return tuple(injection_markers(text, line=True, role=role))


def steering_with_lines(text: str, sources: list[Line], mode: str) -> str | None:
    """The steering patterns in `text` or in the lines it rests on (as each was said, and as
    the transcript shows it), or None."""
    found = injection_markers(text)
    for line in sources:
        found += [*line.steering, *injection_markers(line.text, line=True, role=line.role)]
    return ", ".join(dict.fromkeys(found)) if found else None


def untrusted_reason(text: str, sources: list[Line], mode: str) -> str | None:
    """Why a dreamed candidate or a flushed note must be stored untrusted, or None. A pure
    function of its text and the lines it rests on: steering text in either, or, in agent mode,
    a fact about the user that no line of the user's own supports."""
    if found := steering_with_lines(text, sources, mode):
        return found
    if mode != "code" and not any(line.role == "user" for line in sources):
        return NOT_THE_USERS
    return None


NOT_THE_USERS = "not said by the user"


def steered(evidence: list[Any]) -> bool:
    """Whether a memory's evidence records it untrusted for steering, or does not say why (a
    memory flagged before reasons were kept): anything but resting on no line of the user's."""
    reasons = [e.get("untrusted_reason") for e in evidence if isinstance(e, dict) and e.get("untrusted")]
    return not reasons or any(r != NOT_THE_USERS for r in reasons)


def mark_untrusted(candidates: list[Candidate], lines: list[Line], mode: str) -> list[Candidate]:
    """The candidates as stored (`admit`: normalised, redacted), with `untrusted` set by
    `untrusted_reason` (whatever the model said)."""
    by_seq = {ln.seq: ln for ln in lines}
    out = []
    for cand in candidates:
        reason = untrusted_reason(cand.text, [by_seq[q] for q in cand.seqs if q in by_seq], mode)
        if reason:
            log.info("candidate flagged untrusted (%s)", reason)
        update = {
            "untrusted": reason is not None,
            "untrusted_reason": reason,
            "text": admit(cand.text, writer="dream").text,
        }
        out.append(cand.model_copy(update=update))
    return out
