"""Personal numbers: the `Rule`s `redact` applies last. Social security numbers (the US format),
IBANs (their checksum checked) and phone numbers where the words say whose they are ("my phone
number is", "call me at"). Passwords, passphrases and PINs said in prose, in any language, are
read by `meaning`.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files

from dreamer.core.secrets.rules import Rule

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
    Rule("ssn", SSN_RE, "val"),
    Rule("iban", IBAN_RE, 0, lambda m: iban_ok(m.group(0))),
    Rule("phone", PHONE_RE, "val", _phone_ok),
)
