"""Rules for ordinary talk: first-person statements of state and change ("I just moved to
Lisbon", "I switched from Evernote to Obsidian", "I no longer use Outlook", "my new job at
Shopwise"), each written as one sentence about the user. What is asked, supposed or reported of
someone else is not a statement: `blocked_spans` finds those clauses and no rule matches there."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dreamer.engine.extract import Kind

Render = Callable[[re.Match[str]], str]

_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?"
DATE = (
    rf"(?:\d{{1,2}}(?:st|nd|rd|th)?(?: of)? {_MONTH}(?: \d{{4}})?|{_MONTH} \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?"
    r"|\d{4}-\d{2}-\d{2}|(?:next|this) (?:week|month|monday|tuesday|wednesday|thursday|friday)"
    r"|(?:the )?end of (?:the )?\w+)"
)
NOT_PLACE = (
    r"(?!(?:January|February|March|April|May|June|July|August|September|October|November|December|Monday|Tuesday|"
    r"Wednesday|Thursday|Friday|Saturday|Sunday|I|The|My|Our|A|An)\b)"
)
PLACE = NOT_PLACE + r"(?-i:[A-Z][\w'’-]+(?: (?:[A-Z][\w'’-]+|de|do|da|del|la|upon|on)){0,3})"
PEND = r"(?![\w'’-])"  # a place or a name ends where its words do
ORG = (
    rf"(?:(?-i:[A-Z][\w&'’.-]*(?: (?:[A-Z][\w&'’.-]*|of|and|&))*){PEND}"
    rf"|(?:an?|the) [a-z][\w' -]{{1,40}}? in {PLACE}{PEND}|(?:an?|the) [a-z][\w' -]{{1,40}}?(?=[,.;:!?\n]|$))"
)
VALUE = r"[^,.;:!?\n]{2,80}?"
END = r"(?=\s*(?:[,.;:!?\n)]|$|\s(?:and|but|so|because|since|as of|which|where)\b))"
_ADV = r"(?:(?:just|finally|recently|already|officially|now) )?"
_TRAILING = re.compile(
    r"\s+(?:in the end|at last|over the weekend|last \w+|this \w+|for now|now|these days|nowadays|today|yesterday|again|"
    r"instead(?: of .*)?|as well|too|anymore|any more|btw|lol|haha|though|tho|I think|obviously"
    r"|(?:\d+|an?|two|three|a few|a couple of) \w+ ago)$",
    re.I,
)

# A clause that asks, supposes or reports: no statement of the user's is read there.
_HYPOTHETICAL = re.compile(
    r"\b(?:if|what if|whether|suppose|supposing|imagine|would|could|should|might|maybe|perhaps|someday|"
    r"one day|thinking (?:about|of)|considering|wondering|not sure|unless|in case|pretend|hypothetically)\b",
    re.I,
)
_REPORTED = re.compile(
    r"\b(?:he|she|they|who|(?:my|our|his|her) \w+) (?:says?|said|thinks?|told|asked|claims?)\b", re.I
)
_CONDITION = re.compile(r"^\W*(?:what )?if\b|^\W*(?:suppose|imagine)\b", re.I)
_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)")
_CLAUSE = re.compile(r"[^,;:]+[,;:]?")


def blocked_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each clause that is a question, a supposition or someone else's word: the
    asking clause of a question (its last), any clause with a hypothetical or reporting word,
    and the clause after an "if ..." one."""
    spans: list[tuple[int, int]] = []
    for sent in _SENTENCE.finditer(text):
        clauses = [
            (sent.start() + c.start(), sent.start() + c.end(), c.group(0)) for c in _CLAUSE.finditer(sent.group(0))
        ]
        asks = sent.group(0).rstrip().endswith("?")
        after_condition = False
        for k, (start, end, clause) in enumerate(clauses):
            blocked = (
                after_condition
                or (asks and k == len(clauses) - 1)
                or bool(_HYPOTHETICAL.search(clause) or _REPORTED.search(clause))
            )
            after_condition = bool(_CONDITION.search(clause))
            if blocked:
                spans.append((start, end))
    return spans


def clean_value(text: str) -> str:
    """A captured value without the time words said after it ("Obsidian in the end" -> "Obsidian")."""
    value = text.strip(" '\".")
    while (trimmed := _TRAILING.sub("", value)) != value:
        value = trimmed
    return value


_OWN = [
    (re.compile(r"\bmy\b", re.I), "their"),
    (re.compile(r"\bmyself\b", re.I), "themselves"),
    (re.compile(r"\bme\b", re.I), "them"),
]


def _their(value: str) -> str:
    for pattern, repl in _OWN:
        value = pattern.sub(repl, value)
    return value


def say(template: str) -> Render:
    """A renderer filling `template` with the match's named groups, each trimmed and said of the user."""
    return lambda m: template.format(**{k: _their(clean_value(v or "")) for k, v in m.groupdict().items()})


def no_longer_said(m: re.Match[str]) -> str:
    verb, _, rest = m.group("v").partition(" ")
    return f"The user no longer {conjugate(verb)}{' ' + _their(clean_value(rest)) if rest else ''}."


def _has_started(m: re.Match[str]) -> str:
    has = "has " if m.group("have") else ""
    how = m.group("how").lower().replace("gave up", "given up" if has else "gave up")
    return f"The user {has}{how} {_their(clean_value(m.group('v')))}."


def _these_days(m: re.Match[str]) -> str:
    return f"The user {conjugate(m.group('verb').lower())} {_their(clean_value(m.group('v')))} these days."


_EVENTS = {"launching": "launch", "releasing": "release", "submitting": "submission", "presenting": "presentation"}


def _event(m: re.Match[str]) -> str:
    """ "we're launching the app on 1 June": the user's app launch is on 1 June."""
    return f"The user's {_their(clean_value(m.group('t')))} {_EVENTS[m.group('verb').lower()]} is on {m.group('d')}."


_MODALS = frozenset("can could will would shall should may might must".split())


def conjugate(verb: str) -> str:
    """The third person singular of a present-tense verb ("use" -> "uses")."""
    low = verb.lower()
    irregular = {"have": "has", "do": "does", "am": "is", "go": "goes", "was": "was", "can't": "can't"}
    if low in _MODALS:
        return verb
    if low in irregular:
        return irregular[low]
    if low.endswith(("s", "sh", "ch", "x", "o", "z")):
        return verb + "es"
    if low.endswith("y") and low[-2:-1] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


@dataclass(frozen=True)
class TalkRule:
    kind: Kind
    pattern: re.Pattern[str]
    render: Render


def talk_rule(kind: Kind, pattern: str, render: Render) -> TalkRule:
    return TalkRule(kind, re.compile(pattern, re.I), render)


_OFTEN = (
    r"(?:once|twice|(?:three|four|five|six|\d) times) (?:a|per|every) (?:day|week|month)"
    r"|every (?:day|morning|evening|night|week|weekend|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|on (?:weekdays|weekends|(?:mon|tues|wednes|thurs|fri|satur|sun)days)|daily|weekly"
)
_I_HAVE = r"\bI(?:'ve| have)? "
_I_AM = r"\bI(?:'m| am) "
_USE_VERBS = r"(?P<verb>use|run|eat|drink|write|code in|work in|play|listen to|read|take|drive|ride)"
TALK_RULES: list[TalkRule] = [
    talk_rule(
        "profile",
        rf"{_I_HAVE}{_ADV}(?:moved|transferred|switched) to the (?P<v>[\w -]{{2,40}}?) team\b",
        say("The user is on the {v} team."),
    ),
    talk_rule(
        "profile",
        rf"{_I_AM}(?:now )?(?:on|in|part of) the (?P<v>[\w -]{{2,40}}?) team\b",
        say("The user is on the {v} team."),
    ),
    talk_rule(
        "profile",
        rf"\b(?:I|we)(?:'ve| have)? {_ADV}(?:moved|relocated)(?: back)? to (?P<v>{PLACE}){PEND}",
        say("The user lives in {v}."),
    ),
    talk_rule(
        "profile", rf"{_I_AM}{_ADV}(?:moving|relocating) to (?P<v>{PLACE}){PEND}", say("The user is moving to {v}.")
    ),
    talk_rule(
        "profile",
        rf"{_I_AM}(?:now )?(?:based|living|settled) in (?P<v>{PLACE}){PEND}",
        say("The user lives in {v}."),
    ),
    talk_rule(
        "profile",
        rf"\bI {_ADV}(?:accepted|took|got|signed) (?:an?|the|their) (?:job )?(?:offer|job|position|role) "
        rf"(?:at|from|with) (?P<v>{ORG})",
        say("The user accepted a job at {v}."),
    ),
    talk_rule(
        "profile", rf"\bmy new (?:job|role|position) (?:at|with) (?P<v>{ORG})", say("The user has a new job at {v}.")
    ),
    talk_rule(
        "profile",
        rf"{_I_HAVE}{_ADV}(?:started|begun|began) (?:a new job|working|to work) (?:at|for|with) (?P<v>{ORG})",
        say("The user works at {v}."),
    ),
    talk_rule("profile", rf"{_I_HAVE}{_ADV}joined (?P<v>{ORG})", say("The user joined {v}.")),
    talk_rule(
        "profile",
        rf"\bI(?:'ve| have)? (?:just )?(?:got|been) promoted to (?P<v>{VALUE}){END}",
        say("The user was promoted to {v}."),
    ),
    talk_rule(
        "preference",
        rf"{_I_HAVE}{_ADV}(?:switched|moved|migrated|changed|gone) (?:over )?from (?P<a>{VALUE}) "
        rf"to (?P<b>{VALUE}){END}",
        say("The user switched from {a} to {b}."),
    ),
    talk_rule(
        "preference",
        rf"{_I_HAVE}{_ADV}(?:switched|migrated|moved over|changed over) to (?P<v>{VALUE}){END}",
        say("The user switched to {v}."),
    ),
    talk_rule(
        "preference",
        rf"\b(?:I|we)(?:'ve| have)? {_ADV}(?:went|gone|going|decided to go|settled) (?:with|on) "
        rf"(?P<v>{VALUE}){END}",
        say("The user went with {v}."),
    ),
    talk_rule(
        "preference",
        rf"\b(?:these days|nowadays),? I (?:mostly |mainly |only )?{_USE_VERBS} (?P<v>{VALUE}){END}",
        _these_days,
    ),
    talk_rule(
        "preference",
        rf"\bI (?:mostly |mainly |only )?{_USE_VERBS} (?P<v>{VALUE}) (?:these days|nowadays){END}",
        _these_days,
    ),
    talk_rule("preference", rf"\bI now {_USE_VERBS} (?P<v>{VALUE}){END}", _these_days),
    talk_rule("preference", rf"\bI no longer (?P<v>{VALUE}){END}", no_longer_said),
    talk_rule(
        "preference",
        rf"\bI (?:mostly |mainly |only |always )?use (?!it\b|this\b|that\b|them\b)(?P<v>{VALUE}){END}",
        say("The user uses {v}."),
    ),
    talk_rule(
        "preference",
        rf"\bI keep (?:all )?my (?P<a>[\w -]{{2,30}}?) in (?P<v>{VALUE}){END}",
        say("The user keeps their {a} in {v}."),
    ),
    talk_rule(
        "preference",
        rf"\bI(?P<have>'ve| have)? (?P<how>started|stopped|quit|given up|gave up) (?P<v>{VALUE}){END}",
        _has_started,
    ),
    talk_rule("preference", rf"\bI (?:don't|do not|never) eat (?P<v>{VALUE}){END}", say("The user doesn't eat {v}.")),
    talk_rule(
        "preference",
        rf"\bI (?:usually |still |now )?go to (?P<v>(?:the |my )?[\w -]{{2,30}}?) (?P<f>{_OFTEN}){PEND}",
        say("The user goes to {v} {f}."),
    ),
    talk_rule(
        "focus",
        rf"{_I_AM}(?:now )?(?P<v>(?:doing|playing|learning|studying) {VALUE}) (?:now|these days|nowadays){END}",
        say("The user is {v} now."),
    ),
    talk_rule("focus", rf"{_I_AM}(?:now )?taking (?P<v>(?:an?|the) {VALUE}){END}", say("The user is taking {v}.")),
    talk_rule(
        "focus",
        rf"{_I_HAVE}{_ADV}(?:signed up|registered|enrolled) (?:for|in) (?P<v>{VALUE}){END}",
        say("The user signed up for {v}."),
    ),
    talk_rule(
        "focus",
        rf"\b(?:my|our|the) (?P<t>[\w -]{{2,40}}?) (?:is|are) (?:now )?due (?:on |by )?(?P<d>{DATE})",
        say("The user's {t} is due on {d}."),
    ),
    talk_rule(
        "focus",
        rf"\b(?:my|our|the) (?P<t>[\w -]{{2,40}}?) (?:got |has been |have been |was |were |is |has )?"
        rf"(?:moved|pushed(?: back)?|postponed|delayed|slipped|rescheduled|brought forward|changed) (?:back )?"
        rf"to (?P<d>{DATE})",
        say("The user's {t} is now on {d}."),
    ),
    talk_rule(
        "focus",
        rf"\b(?:pushed|moved|extended|postponed|changed) (?:my|our|the) (?P<t>(?:[\w-]+ )?(?:deadline|due date))"
        rf"(?: back| out)?(?: to | until | till |, it's |, it is |, now )(?:on )?(?P<d>{DATE})",
        say("The user's {t} is now on {d}."),
    ),
    talk_rule(
        "focus",
        rf"\b(?:I'm|I am|we're|we are) (?P<verb>launching|releasing|submitting|presenting) (?:my |our |the )?"
        rf"(?P<t>[\w -]{{2,30}}?) (?:on |by )(?P<d>{DATE})",
        _event,
    ),
    talk_rule(
        "focus",
        rf"\b(?:my|our|the) (?P<t>[\w -]{{2,40}}?) (?:is|are) (?:now )?(?:on |for |set for |scheduled for )?(?P<d>{DATE})",
        say("The user's {t} is on {d}."),
    ),
    talk_rule(
        "profile",
        rf"\bI (?:just )?sold (?P<a>{VALUE}) and (?:got|bought) (?P<b>(?:an?|the|my) {VALUE}){END}",
        say("The user sold {a} and got {b}."),
    ),
    talk_rule(
        "profile", rf"\bI (?:just )?(?P<verb>sold|bought|got a new) (?P<v>{VALUE}){END}", say("The user {verb} {v}.")
    ),
]

_MOVE_ONLY = re.compile(
    rf"{_I_HAVE}{_ADV}moved(?: again| house| away)?\b(?! to)|{_I_AM}(?:moving|relocating)\b(?! to)", re.I
)
_IN_PLACE = re.compile(rf"\b(?:in|to) (?P<v>{PLACE}){PEND}")


def move_without_destination(text: str, blocked: list[tuple[int, int]]) -> tuple[str, int] | None:
    """ "I'm moving next month" or "I moved again, I'm in Porto now": a move said without its
    place, the place named elsewhere in the message ("an offer at a startup in Denver"). The
    sentence, and where the move was said; None when there is no such pair."""
    move = next((m for m in _MOVE_ONLY.finditer(text) if not _inside(m.start(), blocked)), None)
    if move is None:
        return None
    places = [m for m in _IN_PLACE.finditer(text) if not _inside(m.start(), blocked)]
    if not places:
        return None
    sentence_end = next((e.start() for e in re.finditer(r"[.!?\n]", text) if e.start() > move.start()), len(text))
    after = [m for m in places if move.start() < m.start() < sentence_end]
    before = [m for m in places if m.start() < move.start()]
    place = clean_value((after[0] if after else before[-1] if before else places[0]).group("v"))
    future = move.group(0).lower().split()[-1] in ("moving", "relocating")
    return (f"The user is moving to {place}." if future else f"The user lives in {place}."), move.start()


def talk_matches(text: str, blocked: list[tuple[int, int]], rules: list[TalkRule]) -> list[tuple[Kind, str, int, int]]:
    """(kind, sentence about the user, start, end) for each statement of state or change outside
    the blocked clauses, by `rules`, earlier rules first; overlapping matches are left to the first."""
    found: list[tuple[Kind, str, int, int]] = []
    for rule in rules:
        for m in rule.pattern.finditer(text):
            if _inside(m.start(), blocked) or any(m.start() < e and s < m.end() for _, _, s, e in found):
                continue
            found.append((rule.kind, rule.render(m), m.start(), m.end()))
    moved = move_without_destination(text, blocked)
    if moved is not None and not any(t == moved[0] for _, t, _, _ in found):
        found.append(("profile", moved[0], moved[1], moved[1] + 1))
    return found


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(s <= position < e for s, e in spans)
