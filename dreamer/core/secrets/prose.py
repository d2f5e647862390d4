"""Secrets said in prose, and personal numbers: the `Rule`s `redact` applies after the formats of
`secret_rules`.

A password, passphrase or PIN is redacted when the words say so ("my password is hunter2", "the
password for the router is ...", "passphrase: ...", "PIN is 4821"); what follows such words is
taken for a secret only when it reads as one (not "the password is wrong", "the password is 16
characters long"). Social security numbers (the US format), IBANs (their checksum checked) and
phone numbers where the words say whose they are ("my phone number is", "call me at").
"""

from __future__ import annotations

import json
import re
from importlib.resources import files

from dreamer.core.secrets.rules import Rule, is_code, is_placeholder
from dreamer.core.secrets.words import DESCRIBING, FUNCTION_WORDS, NOT_A_VALUE

# --- passwords, passphrases and PINs ---------------------------------------------------

# Words that, following "the password is", describe the password instead of giving it (shared
# with the rules by meaning, in every language they read).
_NOT_A_VALUE = NOT_A_VALUE
_DESCRIBING_RE = re.compile(DESCRIBING)
_KEYWORD = r"(?P<word>pass(?:word|phrase|code)|pass[ \-]code|pin(?:[ \-]?(?:code|number))?|(?:cvv|cvc)2?)"
# What may stand between the word and the verb: "for the router", "of my bank account" (a few words).
_QUALIFIER = r"(?:[ \t]+(?:for|of|to|on|at)[ \t]+[\w.@\-']+(?:[ \t]+[\w.@\-']+){0,3}?)?"
_VERB = (
    r"(?P<verb>[ \t]*:[ \t]*"  # "password = X" is an assignment: `secret_rules` reads those
    r"|[ \t]*(?:['’]s|[ \t]+(?:is|was|will[ \t]+be|should[ \t]+be)(?:[ \t]+(?:now|still|actually))?)[ \t]*:?[ \t]+"
    r"|[ \t]+(?:to|into)[ \t]+)"
)
_QUOTED = r"\"(?P<dq>[^\"\n]{1,200})\"|'(?P<sq>[^'\n]{1,200})'|“(?P<cq>[^”\n]{1,200})”|`(?P<bq>[^`\n]{1,200})`"
_TOKEN = r"(?P<bare>[^\s\"'“”`]{1,200})"
_TRAILING = ".,;:)]}>"  # punctuation ending a sentence, not the secret's ("!" and "?" go with it)
_CLAUSE_END = re.compile(
    r"(?i)(?:\s*$|\s*[\n.,;!?)\]]|\s+(?:and|but|so|or|then|now|btw|please|if|because|which|though|when|for|"
    r"—|-)\b)"
)
_SECRETISH = re.compile(r"(?=.*[0-9])(?=.*[A-Za-z])|[^\w\s\-'’]|[a-z][A-Z]")  # "case-sensitive" is a word

PROSE_SECRET_RE = re.compile(
    rf"(?i)(?<![\w\-]){_KEYWORD}s?(?![\w\-]){_QUALIFIER}{_VERB}(?:{_QUOTED}|{_TOKEN})",
)
_WORDS = re.compile(r"[^\s.,;!?\n]+(?:[ \t]+[^\s.,;!?\n]+){1,11}")


def _kind(m: re.Match[str]) -> str:
    word = m.group("word").lower()
    if word.startswith("passphrase"):
        return "passphrase"
    return "password" if word.startswith("pass") else "pin"


def _value_span(m: re.Match[str]) -> tuple[str, int, int] | None:
    """The secret's text and span: quoted, one token (trailing punctuation left out), or for a
    passphrase the words up to the end of the sentence."""
    for name in ("dq", "sq", "cq", "bq"):
        if m.group(name) is not None:
            return m.group(name), m.start(name), m.end(name)
    start, end = m.span("bare")
    token = m.group("bare").rstrip(_TRAILING)
    if not token:
        return None
    if _kind(m) == "passphrase" and (words := _WORDS.match(m.string, start)) is not None:
        phrase = words.group(0)
        if not any(w.lower() in FUNCTION_WORDS for w in phrase.split()):  # words, not a sentence
            return phrase, start, start + len(phrase)
    return token, start, start + len(token)


def _reads_as_a_secret(m: re.Match[str]) -> bool:
    found = _value_span(m)
    if found is None:
        return False
    value, _, end = found
    if is_placeholder(value) or value.startswith("[REDACTED"):
        return False
    quoted = m.group("bare") is None
    if not quoted and is_code(value, m.group("word")):  # "password: os.environ[...]"
        return False
    if _kind(m) == "pin":
        return bool(re.fullmatch(r"\d{3,12}", value)) and bool(_CLAUSE_END.match(m.string, end))
    if quoted:
        return True
    secretish = bool(_SECRETISH.search(value))
    if m.group("verb").strip() in ("to", "into"):  # "sent the password to Bob": only what reads as a secret
        return secretish and not value.isdigit()
    if " " in value.strip():  # a passphrase of plain words (`_value_span`)
        return True
    first = value.split()[0].lower()
    if first.split("-")[0] in _NOT_A_VALUE or (first.isalpha() and _DESCRIBING_RE.fullmatch(first)):
        return False
    if value.isdigit():  # "the password is 16 characters long"
        return bool(_CLAUSE_END.match(m.string, end))
    return secretish or bool(_CLAUSE_END.match(m.string, end))


def _prose_span(m: re.Match[str]) -> tuple[int, int]:
    found = _value_span(m)
    return (found[1], found[2]) if found else m.span("bare")


# --- personal numbers ------------------------------------------------------------------

_SSN_CONTEXT = r"(?:ssn|ss\#|social[ \t]+security(?:[ \t]+(?:number|no\.?|\#))?|social[ \t]+insurance[ \t]+number)"
# A number in the US format (area not 000, 666 or 9xx; group not 00; serial not 0000) that the
# words before it call a social security number: "my SSN is 078-05-1120" (a bare 3-2-4 number is
# too often something else to be taken for one).
SSN_RE = re.compile(
    rf"(?i)(?<!\w){_SSN_CONTEXT}(?!\w)[^\n\d]{{0,30}}?"
    r"(?P<val>(?<!\d)(?!000|666|9\d\d)\d{3}(?P<sep>[ \t\-]?)(?!00)\d{2}(?P=sep)(?!0000)\d{4})(?![\d\-])"
)

# IBAN lengths by country (ISO 13616 registry, `iban_lengths.json`); a country not listed may
# be 15 to 34 characters.
_IBAN_LENGTHS: dict[str, int] = json.loads(
    files("dreamer.core.secrets").joinpath("iban_lengths.json").read_text(encoding="utf-8")
)
IBAN_RE = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)(?![A-Za-z0-9])"
)


def iban_ok(text: str) -> bool:
    """Whether `text` (spaces allowed) is an IBAN: its country's length, and mod 97 of its digits is 1."""
    iban = text.replace(" ", "").upper()
    want = _IBAN_LENGTHS.get(iban[:2])
    if (want is not None and len(iban) != want) or not 15 <= len(iban) <= 34:
        return False
    if not iban[:2].isalpha() or not iban[2:4].isdigit():
        return False
    moved = iban[4:] + iban[:4]
    return int("".join(str(int(ch, 36)) for ch in moved)) % 97 == 1


_WHOSE = r"(?:my|his|her|their|our|your)"
_PHONE_WORDS = r"(?:(?:home|work|cell|mobile|personal|private|direct)[ \t]+)?(?:phone|cell|mobile|telephone|number)(?:[ \t]+number)?"
_PHONE_SAID = (
    rf"(?:\b{_WHOSE}[ \t]+{_PHONE_WORDS}[ \t]*(?:['’]s|[ \t]is|[ \t]was|:|=)?"
    r"|\b(?:call|text|ring|reach|phone|whatsapp|sms)[ \t]+(?:me|us|him|her|them)[ \t]+(?:at|on)\b)"
)
PHONE_RE = re.compile(rf"(?i){_PHONE_SAID}[ \t]*:?[ \t]*(?P<val>\+?\(?\d[\d \t().\-]{{5,20}}\d)(?![\d\-])")


def _phone_ok(m: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", m.group("val"))
    return 7 <= len(digits) <= 15 and ":" not in m.group("val")


PROSE_RULES: tuple[Rule, ...] = (
    Rule(_kind, PROSE_SECRET_RE, "bare", _reads_as_a_secret, span=_prose_span),
    Rule("ssn", SSN_RE, "val"),
    Rule("iban", IBAN_RE, 0, lambda m: iban_ok(m.group(0))),
    Rule("phone", PHONE_RE, "val", _phone_ok),
)
