"""The secret formats `redact` recognises: one `Rule` per format, most specific first.

Each rule is a regex, the group holding the secret, and an optional check that turns away
look-alikes (placeholders, code, UUIDs, numbers failing Luhn)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib.resources import files

MARKER_RE = re.compile(r"\[REDACTED:[a-z0-9_]+\]")

# --- building blocks ------------------------------------------------------------------


# Key names whose value is a secret whatever it looks like (`secret_words`; a match must end
# the key name: ``password_hash`` and ``max_tokens`` are not secrets), short words that only
# count as a whole segment (`short_words`: ``DB_PASS``, ``db.pwd`` but not ``bypass``), key
# names that make a high-entropy value suspicious (`keylike`), and the schemes an
# Authorization header names before its credentials (`auth_schemes`): `key_words.json`.
_WORDS: dict[str, list[str]] = json.loads(
    files("dreamer.core.secrets").joinpath("key_words.json").read_text(encoding="utf-8")
)
_SECRET_WORDS = "|".join(_WORDS["secret_words"])
_SHORT_WORDS = "|".join(_WORDS["short_words"])
_AUTH_SCHEMES = frozenset(_WORDS["auth_schemes"])
_KEY = (
    rf"(?:[A-Za-z0-9_.\-]*?(?:{_SECRET_WORDS})"
    rf"|(?:[A-Za-z0-9]+[_.\-])+(?:{_SHORT_WORDS})|(?:{_SHORT_WORDS}))"
)
_KEYLIKE = rf"[A-Za-z0-9_.\-]*?(?:{'|'.join(_WORDS['keylike'])})[A-Za-z0-9_]*"

# ``=``, ``:``, ``:=``, ``=>``, or a type-annotated assignment ``name: str = value``.
_SEP = (
    r"(?P<sep>\\?[\"']?[ \t]*"
    r"(?::[ \t]*[A-Za-z_][\w.]*(?:\[[^\]\n]{0,80}\])?(?:[ \t]*\|[ \t]*None)?[ \t]*=(?!=)"
    r"|:=|=>|:|=(?!=))[ \t]*)"
)
_SEP_CHARS = ":="  # every separator holds one of these
# A value: an escaped-JSON string, a quoted string (with an optional string prefix), or
# a bare run up to whitespace or a delimiter.
_VALUE = (
    r"(?:[rbfuRBFU]{0,2}\\\"(?P<edq>(?:[^\"\\\n]|\\[^\"\n])*)\\\""
    r"|[rbfuRBFU]{0,2}\"(?P<dq>(?:[^\"\\\n]|\\.)*)\""
    r"|[rbfuRBFU]{0,2}'(?P<sq>(?:[^'\\\n]|\\.)*)'"
    r"|(?P<bare>(?:[^\s'\"`,;\\]|\\(?![\"']))*[^\s'\"`,;\\)\]}>]))"
)


@dataclass(frozen=True)
class Rule:
    """One secret format: a regex, the group that holds the secret, and an optional check.

    `needs`: characters of which the pattern cannot match without one (empty: no such
    characters); a text with none of them skips the pattern. `span`: where the secret is in a
    match, when no one group says it. `folded`: the case-insensitive pattern made case-sensitive,
    to find where it may match in the lower-cased text (several times faster for a pattern of
    many words)."""

    kind: str | Callable[[re.Match[str]], str]
    pattern: re.Pattern[str]
    group: str | int = 0
    check: Callable[[re.Match[str]], bool] | None = None
    needs: str = ""
    span: Callable[[re.Match[str]], tuple[int, int]] | None = None
    folded: re.Pattern[str] | None = None

    def may_match(self, text: str) -> bool:
        return not self.needs or any(ch in text for ch in self.needs)

    def matches(self, text: str, lowered: str) -> Iterator[re.Match[str]]:
        """Every match of the pattern in `text` (`lowered`: the text lower-cased)."""
        if self.folded is None or len(lowered) != len(text):
            yield from self.pattern.finditer(text)
            return
        pos = 0
        while (f := self.folded.search(lowered, pos)) is not None:
            m = self.pattern.match(text, f.start())
            if m is not None:
                yield m
            pos = max(m.end(), f.start() + 1) if m is not None else f.start() + 1  # where finditer would go on

    def kind_of(self, m: re.Match[str]) -> str:
        return self.kind(m) if callable(self.kind) else self.kind


def _rx(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


# --- checks ---------------------------------------------------------------------------

_PLACEHOLDER_RE = re.compile(
    r"""(?ix)^(?:
        none|null|nil|true|false|undefined|empty|n/a|tbd|todo|redacted
      | \*+ | x{3,} | \.{3,} | •+ | -+ | \?
      | <[^<>]*>? | \$\{[^}]*\}? | \$[A-Za-z_][A-Za-z0-9_]* | \$\d+ | \{\{.*\}\} | %\(?\w*\)?s
      | \[REDACTED(?::[a-z0-9_]+)?\]
      | your[_\-]?[a-z_\-]*
    )$"""
)
_TYPE_NAMES = frozenset(
    "str string bytes int bool float any object secretstr secretbytes optional text char varchar".split()
)
_CODE_CALL_RE = re.compile(r"^[A-Za-z_$][\w$.]*[(\[]")
_DOTTED_RE = re.compile(r"^[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+$")
_SECRETISH_RE = re.compile(r"^(?=.*[0-9!@#$%^&*+=/?~|])\S{6,}$")


def _value(m: re.Match[str]) -> tuple[str, str]:
    """(which value group matched, its text)."""
    for name in ("edq", "dq", "sq", "bare"):
        v = m.group(name)
        if v is not None:
            return name, v
    return "bare", ""


def is_placeholder(value: str) -> bool:
    """Whether a value stands for a secret without being one ("<your-key>", "${TOKEN}", "***", "none")."""
    v = value.strip()
    return not v or bool(_PLACEHOLDER_RE.match(v)) or v.lower() in _TYPE_NAMES


def is_code(value: str, key: str) -> bool:
    """A bare value that reads as an expression: a call, an index, an attribute, the key itself."""
    if _CODE_CALL_RE.match(value) or _DOTTED_RE.match(value):
        return True
    k = key.strip("\"'-").lower()
    return value.lower() == k or value.lower() == k.replace("-", "_")


def _ends_line(m: re.Match[str]) -> bool:
    rest = m.string[m.end() : m.end() + 2]
    return rest == "" or rest[0] in "\r\n,}];" or rest.startswith(("\\n", "\\r"))


def _assignment_ok(m: re.Match[str]) -> bool:
    which, value = _value(m)
    if is_placeholder(value):
        return False
    if which != "bare":
        return True
    if is_code(value, m.group("key")):
        return False
    sep = m.group("sep").strip(" \t\"'\\")
    if sep == ":" and not _ends_line(m):
        # ``Secret: always test first`` is prose; ``password: hunter2`` is not.
        return bool(_SECRETISH_RE.match(value))
    return True


def _assignment_kind(m: re.Match[str]) -> str:
    key = m.group("key").lower()
    if "pass" in key or "pwd" in key:
        return "password"
    if "token" in key:
        return "token"
    if "secret" in key:
        return "secret"
    return "api_key"


def shannon_entropy(s: str) -> float:
    """Bits per character."""
    if not s:
        return 0.0
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


_UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}$")


def _high_entropy_ok(m: re.Match[str]) -> bool:
    _, value = _value(m)
    if len(value) < 20 or _UUID_RE.match(value) or is_placeholder(value):
        return False
    if not re.fullmatch(r"[A-Za-z0-9+/=_\-.~]+", value):
        return False
    if not (re.search(r"[0-9]", value) and re.search(r"[A-Za-z]", value)):
        return False
    if sum(value.count(c) for c in "_-.") / len(value) >= 0.1:
        return False  # identifiers and slugs: ``user_42_preferences_cache``
    return shannon_entropy(value) >= 3.5


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


_CARD_PREFIX_RE = re.compile(r"^(?:4|5[1-5]|2[2-7]|3[47]|3[068]|35|6)")


_IBAN_HEAD_RE = re.compile(r"[A-Z]{2}\d{2} ?$")


def _card_ok(m: re.Match[str]) -> bool:
    raw = m.group(0)
    if _IBAN_HEAD_RE.search(m.string, max(0, m.start() - 5), m.start()):
        return False  # the digits of an IBAN: its own rule names it
    seps = {c for c in raw if not c.isdigit()}
    groups = raw.replace("-", " ").split()
    if len(seps) > 1 or len(groups) > 1 and len(groups[0]) != 4:
        return False  # a card is written in fours first: not "302-4471823-1192", an order
    digits = re.sub(r"\D", "", raw)
    return 13 <= len(digits) <= 19 and bool(_CARD_PREFIX_RE.match(digits)) and luhn_ok(digits)


def _auth_ok(m: re.Match[str]) -> bool:
    return m.group("val").lower() not in _AUTH_SCHEMES


def _not_marker(group: str) -> Callable[[re.Match[str]], bool]:
    return lambda m: not m.group(group).startswith("[REDACTED")


# --- the rules, most specific first ----------------------------------------------------

RULES: tuple[Rule, ...] = (  # the formats `vendors` (detect-secrets) does not know, or knows less of
    Rule(
        "private_key",
        _rx(
            r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----|\Z)"
        ),
    ),
    Rule(
        "aws_secret_key",
        _rx(
            r"(?i)aws[_\-.]?secret[_\-.]?(?:access[_\-.]?)?key\\?[\"']?[ \t]*(?:=>|[:=]|[ \t])[ \t]*\\?[\"']?"
            r"(?P<val>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
        "val",
    ),
    Rule(
        "discord_webhook",
        _rx(r"discord(?:app)?\.com/api/webhooks/\d+/(?P<val>[A-Za-z0-9_\-]{30,})"),
        "val",
    ),
    Rule("azure_sas", _rx(r"[?&]sig=(?P<val>[A-Za-z0-9%+/=]{16,})"), "val"),
    Rule(
        "url_password",
        _rx(
            r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s:/?#@'\"<>]*:"
            r"(?P<val>[^\s/?#'\"<>]+)@(?=[^\s/?#@'\"<>]*[A-Za-z0-9])"
        ),
        "val",
        _not_marker("val"),
    ),
    Rule(
        "authorization",
        _rx(
            r"(?i)\bauthorization\\?[\"']?[ \t]*[:=][ \t]*\\?[\"']?"
            r"(?:[A-Za-z][A-Za-z0-9_\-]{1,20}[ \t]+)?(?P<val>[A-Za-z0-9._~+/\-]{8,}=*)"
        ),
        "val",
        _auth_ok,
    ),
    Rule(
        "authorization",
        _rx(r"(?i)\bbearer[ \t]+(?P<val>(?=[A-Za-z0-9._~+/\-]*[0-9])[A-Za-z0-9._~+/\-]{16,}=*)"),
        "val",
    ),
    Rule(
        "password",
        _rx(
            r"(?i)(?<![A-Za-z0-9_\-])--?(?:password|passwd|pass|db-password)[ \t]+"
            r"(?P<val>\"[^\"\n]+\"|'[^'\n]+'|(?!-)[^\s'\"]+)"
        ),
        "val",
        _not_marker("val"),
    ),
    Rule(
        "password",
        _rx(
            r"(?i)\b(?:sshpass[ \t]+-p[ \t]*|mysql(?:dump|admin)?\b[^\n]*?[ \t]-p(?=[^\s-]))"
            r"(?P<val>\"[^\"\n]+\"|'[^'\n]+'|[^\s'\"]+)"
        ),
        "val",
        _not_marker("val"),
    ),
    Rule(
        "password",
        _rx(
            r"(?i)\b(?:curl|wget|http)\b[^\n]{0,200}?[ \t](?:-u|--user|--http-user)[ \t=]?[\"']?[^\s:\"'@]*:(?P<val>[^\s\"'@]+)"
        ),
        "val",
        _not_marker("val"),
    ),
    Rule(
        "password",
        _rx(r"(?i)\bmachine[ \t]+\S+(?:\s+(?:login|account)[ \t]+\S+)*\s+password[ \t]+(?P<val>\S+)"),
        "val",
        _not_marker("val"),
    ),
    Rule(
        _assignment_kind,
        _rx(rf"(?i)(?<![A-Za-z0-9_.\-/])\\?[\"']?(?P<key>-{{0,2}}{_KEY})(?![A-Za-z0-9_]){_SEP}{_VALUE}"),
        "value",
        _assignment_ok,
        needs=_SEP_CHARS,
    ),
    Rule(
        _assignment_kind,
        _rx(
            rf"(?i)<(?P<key>[A-Za-z0-9_:\-]*?(?:{_SECRET_WORDS}))>[ \t]*(?P<val>[^<\s][^<\n]{{0,500}}?)"
            r"[ \t]*</(?P=key)>"
        ),
        "val",
        lambda m: not is_placeholder(m.group("val")),
    ),
    Rule("credit_card", _rx(r"(?<![\w.\-])[0-9](?:[ \-]?[0-9]){12,18}(?![\w\-])(?!\.[0-9])"), 0, _card_ok),
    Rule(
        "high_entropy",
        _rx(rf"(?i)(?<![A-Za-z0-9_.\-/])\\?[\"']?(?P<key>{_KEYLIKE})(?![A-Za-z0-9_]){_SEP}{_VALUE}"),
        "value",
        _high_entropy_ok,
        needs=_SEP_CHARS,
    ),
)
