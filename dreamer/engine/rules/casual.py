"""Casual talk read as written: "im an icu nurse", "i moved to lisbon last week", "ive gone
with thunderbird". `formal` puts back the apostrophes and the capital I the rules are written
for; in a message written in lowercase, `recase` gives a capital to what the rules read as a
name: a place after a move ("moved to lisbon"), an employer after a job ("job at shopwise"),
a weekday, a month beside its day, a car or an app by its known name. Nothing else is
capitalised, so a lowercase word is never taken for a name elsewhere."""

from __future__ import annotations

import re
from collections.abc import Callable

from dreamer.core.topics import CARS

_CONTRACTIONS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    (re.compile(r"[’‘]"), "'"),
    (re.compile(r"\bi(?=')"), "I"),
    (re.compile(r"\bim\b", re.I), "I'm"),
    (re.compile(r"\bive\b", re.I), "I've"),
    (re.compile(r"\bi\b(?!\.e\.|\.)"), "I"),
    (re.compile(r"\bid(?= (?:like|love|rather|prefer|say|be|need|want|never|probably|go|have)\b)", re.I), "I'd"),
    (
        re.compile(r"\b(do|does|did|is|are|was|were|have|has|had|could|should|would|must|ca|wo|ai)nt\b(?!')", re.I),
        r"\1n't",
    ),
    (re.compile(r"\b(that|what|there|here|where|who|how|he|she)s\b(?!')", re.I), r"\1's"),
    (re.compile(r"\b(you|they)re\b", re.I), r"\1're"),
    (re.compile(r"\b(you|they|we)ve\b", re.I), r"\1've"),
    (re.compile(r"(^|[,.;:!?]\s*|\b(?:and|but|so|because|cause|now) )its\b", re.I), r"\1it's"),
    (
        re.compile(
            r"(^|[,.;:!?]\s*|\b(?:and|but|so|because|cause) )were(?= (?:\w+ing|on|in|at|based|now|all)\b)", re.I
        ),
        r"\1we're",
    ),
    (  # a sentence of one's own news opens on its verb: "just moved to lisbon", "started at initech"
        re.compile(
            r"(^|[.!?]\s+|\n)((?:(?:ok|so|well|update|news|big news|also|and|btw)[,:!]? )*)"
            r"(?=(?:just |finally |officially |recently )?(?:moved|relocated|started|switched|joined|accepted|quit|"
            r"got promoted|signed up|enrolled)\b)",
            re.I,
        ),
        r"\1\2I ",
    ),
    (  # "my sisters thesis" is hers
        re.compile(
            r"\b((?:my|our) (?:sister|brother|mom|mum|dad|wife|husband|partner|friend|boss|coworker|colleague|son|"
            r"daughter|kid|roommate|flatmate|manager|girlfriend|boyfriend|cousin|aunt|uncle|neighbou?r))s"
            r"(?= (?!are|were|have|had|and|or|who|live|went|got|said|say|think|is|was)[a-z])",
            re.I,
        ),
        r"\1's",
    ),
    (re.compile(r"\bu\b(?!\.)"), "you"),
    (re.compile(r"\bur\b"), "your"),
    (re.compile(r"\b(?:pls|plz)\b", re.I), "please"),
]


def formal(text: str) -> str:
    """The text with the apostrophes and the capital I of casual writing put back: "im" is
    "I'm", "dont" "don't", "ive" "I've", "u" "you", "pls" "please"."""
    for pattern, repl in _CONTRACTIONS:
        text = pattern.sub(repl, text)
    return text


# What a lowercase word after "moved to" or "a job at" is when it is not a name.
_NOT_A_NAME = frozenset(
    """a an the my our your his her their its this that these those it me you us them him myself ourselves
    and or but so because since as when while if then than to in on at for with from by of into onto about
    now today tonight tomorrow yesterday last next soon again already just finally recently still also too
    home work school uni college country abroad here there somewhere anywhere nowhere everywhere
    bed night nights weekend weekends free least most all some one two both each every another other
    new old big small bigger smaller different same better worse part full remote remotely hybrid site
    office team company job role startup agency bank hospital place apartment flat house room area
    town city week month year day morning evening afternoon btw lol haha ok okay yeah yes no not never thing stuff
    family friends parents mum mom dad kids partner time advance person general total fact case touch charge
    love trouble pain mind public private order progress line traffic fact theory practice short particular
    starts says said sucks pays wants needs went feels felt looks seems originally actually currently basically honestly apparently eventually permanently temporarily though tho
    be is are was were been being have has had do does did get got go going went done till until code""".split()
)
_WORD = r"[a-z][\w'&-]*(?:\.[a-z]+)*"
_PLACE_CUE = (
    r"\b(?:(?:moved|moving|relocated|relocating|move|relocate)(?: back| over| out| away)? to"
    r"|(?:live|lives|living|based|settled|staying|stuck|grew up|born and raised|raised|here) in"
    r"|first (?:week|month|day|night|weekend)s? in|from)\s"
)
_ORG_CUE = (
    r"\b(?:(?:work|works|working|worked|job|jobs|offer|position|role|notice|internship|employed|hired|contract|start"
    r"|starting|started|interning|interview|analyst|engineer|developer|designer|manager|nurse|intern|teacher)"
    r"(?: (?:as an? )?[\w-]+){0,3}? (?:at|for|with|by)|joined)\s"
)
_MOVE = re.compile(r"\b(?:moved|moving|relocat\w*)\b", re.I)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_MONTH_BY_DAY = re.compile(
    rf"(?<=\d )(?:{_MONTHS})\b|(?<=\d(?:st|nd|rd|th) )(?:{_MONTHS})\b|(?<=of )(?:{_MONTHS})(?= \d)"
    rf"|\b(?:{_MONTHS})(?= \d{{1,2}}(?:st|nd|rd|th)?\b)"
)
_SHORT_MONTH = {m[:3]: m for m in _MONTHS.split("|")} | {"sept": "september"}
_MONTH_SHORT = re.compile(r"\b(jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)\.?(?= \d{1,2}(?:st|nd|rd|th)?\b)")
_WEEKDAY = re.compile(r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b")
_KNOWN = {
    **{name: name.capitalize() for name in CARS.split("|")},
    **dict.fromkeys(("bmw", "vw"), None),
    "vs code": "VS Code",
    "vscode": "VS Code",
    "neovim": "Neovim",
    "emacs": "Emacs",
    "pycharm": "PyCharm",
    "intellij": "IntelliJ",
    "xcode": "Xcode",
    "sublime text": "Sublime Text",
    "sublime": "Sublime",
    "outlook": "Outlook",
    "thunderbird": "Thunderbird",
    "gmail": "Gmail",
    "fastmail": "Fastmail",
    "protonmail": "ProtonMail",
    "notion": "Notion",
    "apple notes": "Apple Notes",
    "obsidian": "Obsidian",
    "evernote": "Evernote",
    "onenote": "OneNote",
    "logseq": "Logseq",
    "joplin": "Joplin",
    "iphone": "iPhone",
    "pixel": "Pixel",
    "oneplus": "OnePlus",
}
_KNOWN_NAME = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, _KNOWN), key=len, reverse=True)) + r")\b")


def is_lowercase(text: str) -> bool:
    """Whether a message is written without capitals for names: no capital letter but the
    first of a sentence and "I"."""
    bare = re.sub(r"\bI(?:'\w+)?\b", "", text)
    return not any(re.search(r"[A-Z]", s.lstrip()[1:]) for s in re.split(r"[.!?:\n]+\s", bare))


def recase(text: str) -> str:
    """In a lowercase message, a capital for each word read as a name: the place after a move,
    the employer after a job, weekdays, months beside their day, known cars and apps."""
    if not is_lowercase(text):
        return text
    text = _KNOWN_NAME.sub(lambda m: _KNOWN[m.group(0)] or m.group(0).upper(), text)
    text = _WEEKDAY.sub(lambda m: m.group(0).capitalize(), text)
    text = _MONTH_SHORT.sub(lambda m: _SHORT_MONTH[m.group(1)], text)
    text = _MONTH_BY_DAY.sub(lambda m: m.group(0).capitalize(), text)
    cues = [_PLACE_CUE, _ORG_CUE] + ([r"\bin\s"] if _MOVE.search(text) else [])
    for cue in cues:
        text = re.sub(rf"((?i:{cue}))({_WORD}(?: {_WORD}){{0,2}})", _capitalise_name, text)
    return text


def _capitalise_name(m: re.Match[str]) -> str:
    words = m.group(2).split(" ")
    name: list[str] = []
    for word in words:
        if (
            (word in _NOT_A_NAME and not (name and word in ("town", "city", "general")))
            or word.endswith(("ing", "ed"))
            or not word[:1].isalpha()
        ):
            break
        name.append(word)
    if not name:
        return m.group(0)
    named = " ".join(w[:1].upper() + w[1:] for w in name)
    return m.group(1) + named + m.group(2)[len(" ".join(name)) :]


def read_casual(text: str) -> str:
    """Casual text as the rules read it: `formal`, then `recase`."""
    return recase(formal(text))
