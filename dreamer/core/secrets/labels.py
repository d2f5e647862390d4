"""Where a text labels a secret, in any of the languages of `labels.json` (read once).

The table is data: for each language, the phrases that name each kind of secret (a password, a
PIN, a door code, a one-time code, a recovery phrase, a security answer, a card's CVV, an API
key, a national identity number, recovery codes, a bank account number), the phrases that say what follows opens something (``access``), and the words that make a
code word a door code (``door``) or a PIN (``card``). A phrase matches case-insensitively, a
space in it standing for any run of spaces or hyphens. In a script that separates words, a label
starts a word and may carry an ending ("hasłem", "şifresi", "пароля"); in one that does not
(Chinese, Japanese, Korean, Thai, Arabic, Hebrew) it may stand inside one. A word one edit away
from a label of six letters or more ("pasword", "contrasena") is that label, misspelt.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib.resources import files

_KIND_NAMES = (
    "password pin door_code otp seed_phrase security_answer cvv api_key national_id recovery_code bank_account"
)
KINDS = (*_KIND_NAMES.split(), "access")
_HELPERS = ("door", "code", "card", "not_labels", "column")
_MARKER = re.compile(r"\[redacted:[a-z0-9_]+\]")
_NEAR = 24  # how far a code word and a door or card word may stand apart


@dataclass(frozen=True)
class Label:
    start: int
    end: int
    kind: str


SPACELESS = (
    "\u0590-\u08ff\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af"
    "\uf900-\ufaff\ufb1d-\ufdff\ufe70-\ufeff\uff00-\uffef"
)
"""Scripts written without spaces between words, or whose words take prefixes and particles:
Hebrew, Arabic, Thai, Lao, Myanmar, Khmer, Hangul, CJK and kana, full-width forms."""
_SPACELESS = re.compile(f"[{SPACELESS}]")


def spaceless(ch: str) -> bool:
    """A character of one of the `SPACELESS` scripts."""
    return bool(_SPACELESS.match(ch))


def wordish(ch: str) -> bool:
    """A letter, a mark, a digit or an underscore: part of a word."""
    return ch == "_" or unicodedata.category(ch)[0] in "LMN"


def fold(text: str) -> str:
    """`text` lower-cased, character for character (the same length)."""
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


@cache
def _key(phrase: str) -> str:
    return re.sub(r"[\s\-]+", " ", fold(phrase).strip())


@cache
def table() -> tuple[dict[str, frozenset[str]], re.Pattern[str], dict[str, str], frozenset[str]]:
    """(phrase key -> its roles, one pattern for every phrase, one-deletion key -> label key for
    fuzzy matching, values that are no secret) from `labels.json`."""
    data = json.loads(files("dreamer.core.secrets").joinpath("labels.json").read_text(encoding="utf-8"))
    roles: dict[str, set[str]] = {}
    for kinds in data["languages"].values():
        for role, phrases in kinds.items():
            if role not in KINDS and role not in _HELPERS:
                raise ValueError(f"labels.json: unknown role {role!r}")
            for phrase in phrases:
                roles.setdefault(_key(phrase), set()).add(role)
    pattern = re.compile(_trie(list(roles)))
    fuzzy: dict[str, str] = {}
    for key, rs in roles.items():
        if len(key) >= 6 and " " not in key and key.isalpha() and rs & set(KINDS) and not spaceless(key[0]):
            for i in range(len(key)):
                fuzzy.setdefault(key[:i] + key[i + 1 :], key)
            fuzzy.setdefault(key, key)
    not_values = frozenset(fold(v) for v in data["not_values"])
    return {k: frozenset(v) for k, v in roles.items()}, pattern, fuzzy, not_values


def _trie(phrases: list[str]) -> str:
    """One pattern for every phrase, sharing their prefixes (a space: spaces or hyphens); the
    longest phrase wins where one begins another."""
    tree: dict[str, dict] = {}  # type: ignore[type-arg]
    for phrase in phrases:
        node = tree
        for ch in phrase:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, dict]) -> str:  # type: ignore[type-arg]
        alts = [(r"[\s\-]+" if ch == " " else re.escape(ch)) + build(sub) for ch, sub in sorted(node.items()) if ch]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else f"(?:{'|'.join(alts)})"
        return f"(?:{body})?" if "" in node else body

    return build(tree)


def _bounded(folded: str, start: int, end: int) -> int | None:
    """Where a phrase found at start..end ends with its word ending, or None when it stands
    inside another word."""
    first, last = folded[start], folded[end - 1]
    if not spaceless(first) and start > 0 and wordish(folded[start - 1]) and not spaceless(folded[start - 1]):
        return None
    if spaceless(last):
        return end
    stop = end
    while (
        stop < len(folded)
        and folded[stop] != "_"
        and wordish(folded[stop])
        and not folded[stop].isdigit()
        and not spaceless(folded[stop])
    ):
        stop += 1
    if stop < len(folded) and (folded[stop] == "_" or folded[stop].isdigit()):
        return None  # an identifier: "token_count", "password2"
    if stop == end or folded[end:stop] == "s":  # "PINs"
        return stop
    indic = 0x0900 <= ord(last) <= 0x0DFF
    most = 8 if indic else 2 if folded[start:end].isascii() else 6  # "tokens", not "tokenizer"; "şifresi"
    return stop if (indic or end - start >= 4) and stop - end <= most else None


def _found(folded: str) -> list[tuple[int, int, frozenset[str]]]:
    """Every phrase of the table in the text: (start, end, roles)."""
    roles, pattern, fuzzy, _ = table()
    out: list[tuple[int, int, frozenset[str]]] = []
    for m in pattern.finditer(folded):
        end = _bounded(folded, m.start(), m.end())
        if end is not None:
            out.append((m.start(), end, roles[_key(m.group(0))]))
    taken = {s for s, _, _ in out}
    for w in re.finditer(r"(?<![\w\-])[^\W\d_]{5,}(?![\w\-])", folded):
        word = w.group(0)
        if w.start() in taken or spaceless(word[0]):
            continue
        hits = {fuzzy[v] for v in [word, *(word[:i] + word[i + 1 :] for i in range(len(word)))] if v in fuzzy}
        if hits:
            out.append((w.start(), w.end(), frozenset().union(*(roles[h] for h in hits))))
    return out


def find_labels(text: str) -> list[Label]:
    """Every label of a secret in `text`, by position."""
    folded = _MARKER.sub(lambda m: " " * len(m.group(0)), fold(text))
    found = _found(folded)
    blocked = [(s, e) for s, e, r in found if "not_labels" in r]
    labels: list[Label] = []
    for start, end, roles in found:
        if any(s <= start and end <= e and (s, e) != (start, end) for s, e in blocked) or "not_labels" in roles:
            continue
        if "column" in roles and not _in_table(folded, start):
            roles = roles - {"password"}  # "pass", "pwd": a column's name, not a word of prose
        labels += [Label(start, end, kind) for kind in KINDS if kind in roles][:1]
    labels += _composites(found, folded)
    return sorted(labels, key=lambda lab: (lab.start, lab.end))


def _in_table(text: str, pos: int) -> bool:
    line = text[text.rfind("\n", 0, pos) + 1 : (text.find("\n", pos) + 1 or len(text) + 1) - 1]
    return line.count("|") >= 2 or "\t" in line


def _composites(found: list[tuple[int, int, frozenset[str]]], folded: str) -> list[Label]:
    """A code or password word beside a door word ("код от домофона", "दरवाज़े का कोड") is a door code's
    label; beside a card word ("kod karty", "kartın şifresi"), a PIN's."""
    out: list[Label] = []
    codes = [(s, e) for s, e, r in found if r & {"code", "password"}]  # "M-Pesa nenosiri"
    for s, e, roles in found:
        for helper, kind in (("door", "door_code"), ("card", "pin")):
            if helper not in roles:
                continue
            for cs, ce in codes:
                lo, hi = min(s, cs), max(e, ce)
                gap = folded[min(e, ce) : max(s, cs)]
                if (cs, ce) != (s, e) and len(gap) <= _NEAR and "\n" not in gap:
                    out.append(Label(lo, hi, kind))
    return out


def not_value(token: str) -> bool:
    """A word that reads like a value and names a format or a thing ("base64", "Wi-Fi")."""
    low = re.sub(r"['’][a-z]{1,2}$", "", token.lower())  # "base64'd"
    return low in table()[3] or (len(low) < 40 and _key(low) in table()[0])


def mentions(text: str, role: str) -> bool:
    """Whether `text` holds a word of the table in `role`: a code word ("código", "kode", "код"),
    a door word ("safe", "сейф")."""
    return any(role in roles for _, _, roles in _found(fold(text)))
