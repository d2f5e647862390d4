"""Admission, the policy (pure): what any text that can later be served keeps, and whether it
may be trusted, whoever wrote it.

Every writer of a served column (`dreamer.store.gate`) asks `admit` or `admit_fields`, so a
dream pass, a flush, an agent, a hook, an import, the Markdown read-back, the inspector, code
work, team rounds and offloaded output all get one answer for one text:

1. **normalise**: format characters (zero-width, bidirectional controls, tags) removed, control
   characters other than line breaks and tabs removed, compatibility forms folded (NFKC);
2. **redact**: every secret `redact` finds is replaced by its marker;
3. **trust**: a text that addresses the model (`steering_markers`) is untrusted, with the
   shapes found as its reason. A person's own edit is trusted for its meaning (it needs no
   grounding) but is neither exempt from redaction nor from this check.

The ledger (a session's messages, offloaded tool output) is evidence, not memory: it is
redacted (`admit_ledger`) but keeps its wording and is never served as an instruction.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dreamer.core.secrets.redact import redact
from dreamer.core.trust.memory_text import normalise
from dreamer.core.trust.steering import steering_markers

Writer = Literal[
    "dream", "flush", "agent", "person", "import", "markdown", "team", "experience", "state", "rules", "hook"
]
WRITERS: tuple[str, ...] = Writer.__args__  # type: ignore[attr-defined]

# C0 and C1 controls but tab, line feed and carriage return: never part of what a person wrote.
_CONTROLS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Admitted:
    """A text as it may be stored: `text` normalised and redacted; `untrusted` with its `reason`
    (the steering shapes found) when it addresses the model."""

    text: str
    untrusted: bool = False
    reason: str | None = None


def clean(text: str) -> str:
    """`text` normalised (`normalise`) with its stray control characters removed."""
    return _CONTROLS.sub("", normalise(text))


def admit(text: str, *, writer: Writer) -> Admitted:
    """`text` as any writer may store it: normalised, redacted, its trust decided. Admission is
    idempotent, so a text admitted before (as a row passing two steps of the gate is), or the
    text an admission gave, is answered from memory."""
    key = (text, writer)
    got = _SEEN.get(key)
    if got is None:
        got = _admit(text, writer)
        with _SEEN_LOCK:
            while len(_SEEN) >= _SEEN_MAX:
                _SEEN.pop(next(iter(_SEEN)))
            _SEEN[key] = _SEEN[(got.text, writer)] = got
    return got


_SEEN: dict[tuple[str, str], Admitted] = {}  # oldest first: the first key is the one dropped
_SEEN_MAX = 8192
_SEEN_LOCK = threading.Lock()


def _admit(text: str, writer: Writer) -> Admitted:
    kept = redact(clean(text))
    found = steering_markers(kept)
    if found:
        return Admitted(kept, True, f"steering ({writer}): " + ", ".join(dict.fromkeys(found)))
    return Admitted(kept)


def admit_ledger(text: str, asked: str | None = None) -> str:
    """A ledger text (a message, offloaded output) as stored: its secrets redacted, its wording
    kept; with `asked` (the message before it), the secret it gives when that one asked for one."""
    return redact(text, asked=asked)


def admit_value(value: Any, *, writer: Writer) -> tuple[Any, list[str]]:
    """A JSON value with every string in it admitted: the value as stored and the reasons found."""
    if isinstance(value, str):
        got = admit(value, writer=writer)
        return got.text, [got.reason] if got.reason else []
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        reasons: list[str] = []
        for key, item in value.items():
            out[key], found = admit_value(item, writer=writer)
            reasons += found
        return out, reasons
    if isinstance(value, list | tuple):
        pairs = [admit_value(item, writer=writer) for item in value]
        return [p[0] for p in pairs], [r for p in pairs for r in p[1]]
    return value, []


def admit_fields(fields: Mapping[str, Any], *, writer: Writer) -> tuple[dict[str, Any], str | None]:
    """Several served fields of one row at once: each admitted, and one reason naming the fields
    that address the model (None: none does)."""
    out: dict[str, Any] = {}
    reasons: list[str] = []
    for name, value in fields.items():
        out[name], found = admit_value(value, writer=writer)
        reasons += [f"{name}: {r}" for r in found]
    return out, ("; ".join(reasons) if reasons else None)
