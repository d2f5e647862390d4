"""Tokens by their structure: the vendor formats of `vendor_formats.json` (a prefix, the
characters of the body, how many), and any other token built the way vendors build them.

A vendor token is a short lower-case name and a separator ("glpat-", "sbp_", "dp.pt.") before a
long random body: letters and digits mixed, no word in it, as random as a key is for its length.
Such a run is a secret whatever the vendor, named or not; a hash named by its algorithm
("sha256-..."), an object's id ("call_...", "cus_...") and a run of one character class (a date, a
word) are not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from importlib.resources import files
from typing import Any

from dreamer.core.secrets.rules import shannon_entropy

_NOT_BEFORE = r"(?<![A-Za-z0-9_\-.])"
# A prefix of one to three short lower-case parts ("sbp_", "dp.pt.", "glsa_"), then the body.
_PREFIXED = re.compile(
    rf"{_NOT_BEFORE}(?P<prefix>[a-z]{{2,10}}(?:[_.\-][a-z0-9]{{1,8}}){{0,2}}[_.\-])(?P<body>[A-Za-z0-9]{{20,200}})"
)
UNNAMED = "api_token"  # the kind of a token no listed format names: any other name wins
_HASHES = frozenset({"sha1", "sha224", "sha256", "sha384", "sha512", "md5", "blake2b", "sha", "git"})


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        files("dreamer.core.secrets").joinpath("vendor_formats.json").read_text(encoding="utf-8")
    )
    return data


@cache
def _formats() -> tuple[tuple[str, re.Pattern[str], bool], ...]:
    data = _data()
    out = []
    for f in data["formats"]:
        chars = data["charsets"][f["body"]]
        count = f"{{{f['min']},{f.get('max', '')}}}"
        prefixes = "|".join(re.escape(p) for p in f["prefixes"])
        rx = re.compile(rf"{_NOT_BEFORE}(?:{prefixes})[{chars}]{count}(?![{chars}])")
        out.append((f["kind"], rx, bool(f.get("digit"))))
    return tuple(out)


def _random(body: str) -> bool:
    """A body as random as a key: digits and letters mixed, both cases or a long hex run, and
    close to the most bits a character its length can carry."""
    if not (any(c.isdigit() for c in body) and any(c.isalpha() for c in body)):
        return False
    if any(c.isupper() for c in body) and any(c.islower() for c in body):
        return bool(shannon_entropy(body) >= 4.0)  # random letters of both cases and digits: 4.2 and up
    hexadecimal = len(body) >= 32 and all(c in "0123456789abcdef" for c in body)
    return hexadecimal and shannon_entropy(body) >= 3.3  # random hex: 3.6 and up


def _prefixed(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _PREFIXED.finditer(text):
        end = m.end()
        while end < len(text) and (text[end].isalnum() or text[end] in "_-"):
            end += 1  # a token's tail ("glsa_<body>_<checksum>")
        name = re.split(r"[_.\-]", m.group("prefix"))[0]
        if name in _HASHES or name in _data()["ids"]["prefixes"] or not _random(m.group("body")):
            continue
        yield m.start(), end, UNNAMED


def find_tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each token of a listed vendor format, then of any other prefixed
    random token; a span an earlier format claimed is not claimed again."""
    found: list[tuple[int, int, str]] = []

    def taken(start: int, end: int) -> bool:
        return any(a < end and start < b for a, b, _ in found)

    for kind, rx, digit in _formats():
        for m in rx.finditer(text):
            if (not digit or any(c.isdigit() for c in m.group())) and not taken(*m.span()):
                found.append((*m.span(), kind))
    found += [t for t in _prefixed(text) if not taken(t[0], t[1])]
    return found
