"""What the rules extractor reads ordinary talk with: the shapes of a place, an organisation, a
date and a value, the clauses no statement is read in (a question, a supposition, someone else's
word: `blocked_spans`), and how a match is said as one sentence about the user (`say`). The
patterns themselves, grouped by the slot they fill, are in `rules_slots`."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from dreamer.engine.extraction.extract import Kind

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
ADV = r"(?:(?:just|finally|recently|already|officially|now) )?"
I_HAVE = r"\bI(?:'ve| have)? "
I_AM = r"\bI(?:'m| am) "
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


def their(value: str) -> str:
    for pattern, repl in _OWN:
        value = pattern.sub(repl, value)
    return value


def say(template: str) -> Render:
    """A renderer filling `template` with the match's named groups, each trimmed and said of the user."""
    return lambda m: template.format(**{k: their(clean_value(v or "")) for k, v in m.groupdict().items()})


def no_longer_said(m: re.Match[str]) -> str:
    verb, _, rest = m.group("v").partition(" ")
    return f"The user no longer {conjugate(verb)}{' ' + their(clean_value(rest)) if rest else ''}."


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


def talk_matches(text: str, blocked: list[tuple[int, int]], rules: list[TalkRule]) -> list[tuple[Kind, str, int, int]]:
    """(kind, sentence about the user, start, end) for each statement of state or change outside
    the blocked clauses, by `rules`, earlier rules first; overlapping matches are left to the first."""
    found: list[tuple[Kind, str, int, int]] = []
    for rule in rules:
        for m in rule.pattern.finditer(text):
            if inside(m.start(), blocked) or any(m.start() < e and s < m.end() for _, _, s, e in found):
                continue
            found.append((rule.kind, rule.render(m), m.start(), m.end()))
    return found


def inside(position: int, spans: list[tuple[int, int]]) -> bool:
    return any(s <= position < e for s, e in spans)


_MOVE_ONLY = re.compile(
    rf"{I_HAVE}{ADV}moved(?: again| house| away)?\b(?! to)|{I_AM}(?:moving|relocating)\b(?! to)", re.I
)
_IN_PLACE = re.compile(rf"\b(?:in|to) (?P<v>{PLACE}){PEND}")


def move_without_destination(text: str, blocked: list[tuple[int, int]]) -> tuple[str, int] | None:
    """ "I'm moving next month" or "I moved again, I'm in Porto now": a move said without its
    place, the place named elsewhere in the message ("an offer at a startup in Denver"). The
    sentence, and where the move was said; None when there is no such pair."""
    move = next((m for m in _MOVE_ONLY.finditer(text) if not inside(m.start(), blocked)), None)
    if move is None:
        return None
    places = [m for m in _IN_PLACE.finditer(text) if not inside(m.start(), blocked)]
    if not places:
        return None
    sentence_end = next((e.start() for e in re.finditer(r"[.!?\n]", text) if e.start() > move.start()), len(text))
    after = [m for m in places if move.start() < m.start() < sentence_end]
    before = [m for m in places if m.start() < move.start()]
    place = clean_value((after[0] if after else before[-1] if before else places[0]).group("v"))
    future = move.group(0).lower().split()[-1] in ("moving", "relocating")
    return (f"The user is moving to {place}." if future else f"The user lives in {place}."), move.start()


# --------------------------------------------------------------------------- how a match is said


def has_started(m: re.Match[str]) -> str:
    has = "has " if m.group("have") else ""
    how = m.group("how").lower().replace("gave up", "given up" if has else "gave up")
    return f"The user {has}{how} {their(clean_value(m.group('v')))}."


def these_days(m: re.Match[str]) -> str:
    return f"The user {conjugate(m.group('verb').lower())} {their(clean_value(m.group('v')))} these days."


_EVENTS = {"launching": "launch", "releasing": "release", "submitting": "submission", "presenting": "presentation"}


def event(m: re.Match[str]) -> str:
    """ "we're launching the app on 1 June": the user's app launch is on 1 June."""
    return f"The user's {their(clean_value(m.group('t')))} {_EVENTS[m.group('verb').lower()]} is on {m.group('d')}."


def _a(noun: str) -> str:
    """The noun with its indefinite article ("an iPhone 15", "a Pixel 6")."""
    vowel = noun[:1].lower() in "aeiou" and not noun.lower().startswith(("one", "use", "uni"))
    return f"{'an' if vowel else 'a'} {noun}"


def task_in(m: re.Match[str]) -> str:
    """ "I read email in Outlook": the user reads email in Outlook."""
    mine = "their " if m.group("my") else ""
    return f"The user {conjugate(m.group('verb').lower())} {mine}{m.group('a').lower()} in {clean_value(m.group('v'))}."


def owns(thing: str) -> Render:
    """ "my Pixel 6 keeps dropping wifi": the user's phone is a Pixel 6."""
    return lambda m: f"The user's {thing} is {_a(clean_value(m.group('v')))}."


def now_a(m: re.Match[str]) -> str:
    """ "first month as a freelancer done": the user is now a freelancer."""
    return f"The user is now {_a(clean_value(m.group('v')))}."


PARTNERS = {
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


def _name(word: str) -> str:
    return word[:1].upper() + word[1:]


def partner(m: re.Match[str]) -> str:
    return f"The user's {PARTNERS[m.group('r').casefold()]} is {_name(m.group('n'))}."


def married(m: re.Match[str]) -> str:
    name = _name(m.group("n"))
    return f"The user married {name}." if m.group("w").casefold() == "married" else f"The user got engaged to {name}."
