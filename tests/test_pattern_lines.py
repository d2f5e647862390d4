"""The counter of hand-written pattern lines (`tools/pattern_lines.py`)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "pattern_lines", Path(__file__).parents[1] / "tools" / "pattern_lines.py"
)
assert _spec is not None and _spec.loader is not None
pattern_lines = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pattern_lines)

SOURCE = """
import re
_WORD = r"(?:pass|pin)"
RX = re.compile(
    rf"{_WORD}\\s*:"
    r"|secret"
)
STOP = {"and", "or", "but"}
__all__ = ["RX", "STOP", "shapes"]
SHAPES = {"word": len, "code": max, "list": min}
KINDS = {"pin": ("4", "8"), "otp": ("6", "6"), "cvv": ("3", "4")}
value = data["verbs"] + load("words")
"""


def test_regex_literals_and_word_collections_count_names_and_dispatch_tables_do_not():
    assert pattern_lines.count({"m.py": SOURCE}) == {"m.py": 5}  # _WORD, RX's two lines, STOP, KINDS
