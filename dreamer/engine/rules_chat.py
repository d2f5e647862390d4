"""Rules for chat said without the full sentence: where one lives said in passing ("the rent
here in Leeds"), a switch said as ditching or swapping ("ditched Chrome for Firefox"), a first
month in a role ("first month as a freelancer done"), a partner named in brackets ("Sam (my
bf)") or married ("Sam and I got married"), a date said as now ("the exam is June 3 now", "got
an extension, May 1 now"), a habit dropped ("I don't drink soda anymore"). Each is written as one
sentence about the user; what is asked, supposed or said of someone else is not read."""

from __future__ import annotations

import re

from dreamer.engine.rules_talk import (
    DATE,
    END,
    PEND,
    PLACE,
    VALUE,
    TalkRule,
    clean_value,
    no_longer_said,
    say,
    talk_rule,
)

# Where a clause opens: the start, after punctuation, or after "I" and a filler word.
_CLAUSE = r"(?:^|(?<=[.,;:!?(])\s*|(?<=\n))(?:(?:ok|so|also|and|oh|but|well|finally|just|btw|honestly),? )*"
_SWAP_VERB = r"(?:ditched|dumped|dropped|swapped|traded|replaced|exchanged)"
_PARTNERS = {
    "gf": "girlfriend",
    "bf": "boyfriend",
    "girlfriend": "girlfriend",
    "boyfriend": "boyfriend",
    "wife": "wife",
    "husband": "husband",
    "partner": "partner",
    "fiance": "fiancé",
    "fiancé": "fiancé",
    "fiancee": "fiancée",
    "fiancée": "fiancée",
}
_NOT_A_PERSON = r"(?!(?:i|me|he|she|they|we|you|it|this|that|who|and|or|so|my|our|his|her|their)\b)"


def _name(word: str) -> str:
    return word[:1].upper() + word[1:]


def _partner(m: re.Match[str]) -> str:
    return f"The user's {_PARTNERS[m.group('r').casefold()]} is {_name(m.group('n'))}."


def _married(m: re.Match[str]) -> str:
    name = _name(m.group("n"))
    return f"The user married {name}." if m.group("w").casefold() == "married" else f"The user got engaged to {name}."


def _job(m: re.Match[str]) -> str:
    article = "an" if m.group("v")[:1].casefold() in "aeiou" else "a"
    return f"The user is now {article} {clean_value(m.group('v'))}."


CHAT_RULES: list[TalkRule] = [
    talk_rule(
        "profile",
        rf"\b(?<!visiting )(?<!trip )here in (?P<v>{PLACE}){PEND}(?! for (?:a|the|two|three|\d+) )",
        say("The user lives in {v}."),
    ),
    talk_rule(
        "profile",
        rf"\b(?:part|parts|perks?|joys?) of living in (?P<v>{PLACE}){PEND}",
        say("The user lives in {v}."),
    ),
    talk_rule(
        "preference",
        rf"(?:{_CLAUSE}|\bI (?:(?:just|finally|also) )?){_SWAP_VERB} (?:my |the |our )?(?P<a>{VALUE}) for "
        rf"(?:an? )?(?P<b>{VALUE}){END}",
        say("The user switched to {b}."),
    ),
    talk_rule(
        "preference",
        rf"(?:{_CLAUSE}|\bI (?:(?:just|finally|also) )?)moved (?:everything|all (?:of )?my [\w ]{{2,20}}?) "
        rf"(?:out of|from|off) (?P<a>{VALUE}) (?:into|to|onto) (?P<b>{VALUE}){END}",
        say("The user switched to {b}."),
    ),
    talk_rule(
        "profile",
        rf"{_CLAUSE}(?:(?:my|the) )?(?:first|1st) (?:day|week|month|shift|year) as an? (?P<v>[a-z][\w -]{{1,40}}?)"
        r"(?: (?:done|over|complete|finished|in the books)\b|(?=[,.;:!]|$))",
        _job,
    ),
    talk_rule(
        "profile",
        r"\bI (?:just |have just |'ve just )?started as an? (?P<v>[a-z][\w -]{1,40}?)(?= at\b|[,.;:!]|$)",
        _job,
    ),
    talk_rule(
        "profile",
        rf"\b{_NOT_A_PERSON}(?P<n>[a-z]+) \(my (?P<r>{'|'.join(_PARTNERS)})\)",
        _partner,
    ),
    talk_rule(
        "profile",
        rf"{_CLAUSE}{_NOT_A_PERSON}(?P<n>[a-z]+) and I (?:finally |just |officially )?got (?P<w>married|engaged)\b",
        _married,
    ),
    talk_rule(
        "focus",
        rf"{_CLAUSE}(?:the |my |our )?(?!(?:his|her|their|its|it|that|this|he|she)\b)(?P<t>[a-z]+(?: [a-z]+)?) is (?:now )?(?:on )?(?P<d>{DATE}) now\b",
        say("The user's {t} is now on {d}."),
    ),
    talk_rule(
        "focus",
        rf"\b(?:got|get|given|gave (?:me|us)) an extension(?: to| until| till|,| —| -|:)? (?P<d>{DATE})",
        say("The user got an extension: the deadline is now on {d}."),
    ),
    talk_rule(
        "focus",
        rf"(?:{_CLAUSE}|\bmy )(?P<t>draft|thesis|paper|essay|report|assignment|application|proposal) (?:is )?due "
        rf"(?:to (?:my|the) \w+ )?(?:on |by )?(?P<d>{DATE})",
        say("The user's {t} is due on {d}."),
    ),
    talk_rule(
        "focus",
        rf"\b(?:pushed|moved|extended|postponed) (?:my|our|the) (?P<t>draft|thesis|paper|essay|report|exam|launch"
        rf"|interview|presentation|review|release|surgery|wedding|race|trip)(?: back| out)? (?:to|until|till) "
        rf"(?:on )?(?P<d>{DATE})",
        say("The user's {t} is now on {d}."),
    ),
    talk_rule(
        "preference",
        rf"\bI (?:don't|do not) (?P<v>(?:drink|eat|use|play|smoke|run|watch|do) {VALUE}) (?:anymore|any more){END}",
        no_longer_said,
    ),
]
