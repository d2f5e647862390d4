"""Rules for news said in passing, without "I": a notice handed in ("handed in my notice at
Acme today"), the next employer named as what starts ("Globex starts Monday!!"), the first week
somewhere ("ok first week in Sacramento survived"), a diet added as an aside ("vegetarian
btw"). Each is written as one sentence about the user; someone else's news is not read."""

from __future__ import annotations

import re

from dreamer.engine.extract import Kind
from dreamer.engine.rules_talk import ORG, PEND, PLACE, TalkRule, clean_value, say, talk_rule

_OPENS = r"(?:^|(?<=[.,;:!?(-])|(?<=[.,;:!?(-] )|(?<=\bmy )|(?<=\bour )|(?<=\bok )|(?<=\bso )|(?<=\band ))"
_DIETS = r"vegetarian|vegan|pescatarian|gluten-free|lactose intolerant|dairy-free"
_ASIDE = r"btw|fyi|by the way|now|these days|nowadays|if that matters|if it matters"

LIFE_RULES: list[TalkRule] = [
    talk_rule(
        "profile",
        rf"\b(?:I )?(?:just )?(?:handed in|gave|put in|turned in|handing in) (?:my )?notice(?: at (?P<v>{ORG}))?",
        lambda m: f"The user handed in their notice{' at ' + clean_value(m.group('v')) if m.group('v') else ''}.",
    ),
    talk_rule(
        "profile",
        rf"{_OPENS}\s*(?:(?:survived|done with|finished|loving|enjoying) )?(?:my |our |the )?(?:first|1st) "
        rf"(?:week|month|weekend|night|day)s? (?:living |back )?in (?P<v>{PLACE}){PEND}(?! (?:of|at|on|with)\b)",
        say("The user lives in {v}."),
    ),
    talk_rule(
        "profile",
        rf"{_OPENS}\s*(?:(?:also|oh|and|fyi|btw|ps),? )*(?:I'm |I am )?(?:(?:fully|strictly|now|mostly) )?"
        rf"(?P<v>{_DIETS})(?: now| these days)?,? (?:{_ASIDE}){PEND}",
        say("The user is {v}."),
    ),
    talk_rule(
        "profile",
        r"\bI(?:'ve| have)? (?:just |finally |officially )?started at (?P<v>(?-i:[A-Z][\w&'.-]*(?: [A-Z][\w&'.-]*){0,2}))"
        rf"{PEND}",
        say("The user works at {v}."),
    ),
]

_NEWS_OF_A_JOB = re.compile(
    r"\bmy (?:notice|new job|last day)\b|\bI (?:just )?(?:resigned|quit)\b"
    r"|\bI(?:'ve| have)? (?:just )?(?:got|accepted|took) (?:an? |the )?(?:job )?offer\b",
    re.I,
)
_STARTS = re.compile(
    r"(?:^|(?<=[.!?;,])\s*|(?<=[.!?;,]))(?:and |then |now |so )?(?P<v>[A-Za-z][\w&.-]*(?-i: [A-Z][\w&.-]*){0,2}) "
    r"starts (?:on )?(?P<d>(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|(?:next|this) (?:week|month)|the \d+\w*)\b",
    re.I,
)
_NOT_AN_EMPLOYER = frozenset(
    "it that this school work uni college class term semester training onboarding everything life "
    "the job contract course he she they we you I".casefold().split()
)


def new_employer(text: str, blocked: list[tuple[int, int]]) -> list[tuple[Kind, str, int, int]]:
    """ "handed in my notice at Acme today. Globex starts Monday!!": the employer named as what
    starts, read only beside other news of a job; (kind, sentence, start, end) as `talk_matches`."""
    if not any(not any(s <= m.start() < e for s, e in blocked) for m in _NEWS_OF_A_JOB.finditer(text)):
        return []
    found: list[tuple[Kind, str, int, int]] = []
    for m in _STARTS.finditer(text):
        name = m.group("v")
        if name.split()[0].casefold() in _NOT_AN_EMPLOYER or any(s <= m.start("v") < e for s, e in blocked):
            continue
        name = " ".join(w[:1].upper() + w[1:] for w in name.split())
        day = m.group("d").casefold()
        when = f"on {day.capitalize()}" if day.endswith("day") else f"on {day}" if day.startswith("the") else day
        found.append(("profile", f"The user starts a new job at {name} {when}.", m.start("v"), m.end()))
    return found
