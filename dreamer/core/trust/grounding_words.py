"""The words of a memory and of the messages it rests on, as grounding compares them: names
(capitalised words, the one opening a sentence included), numbers (digits, and number words read
as digits) and
content words (what is left once the third-person framing of a memory is taken out), each
reduced to a crude stem so "living", "lives" and "lived" meet. Pure: no model, no I/O."""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

_TOKEN = re.compile(r"(?P<num>\d+(?:[.,:]\d+)*)(?:st|nd|rd|th)?|(?P<word>[^\W\d_]+(?:['’][^\W\d_]+)*)")
_SENTENCE_END = re.compile(r"[.!?]\s*$")
_CLITIC = re.compile(r"['’](?:s|re|ve|ll|d|m|t)$", re.I)

# Words that frame a memory rather than state it: articles, pronouns, auxiliaries, prepositions,
# the third person a memory is written in, the verbs of liking, planning, saying and regarding
# (a summary's "values", "appreciates", "emphasizes"), the kinds' names.
FRAMING = frozenset(
    """a an the this that these those there here it its it's they them their theirs he him his she her hers
    we us our ours you your yours i me my mine myself yourself himself herself itself themselves one's
    is are was were be been being am has have had having do does did done doing will would shall should
    can could may might must ought not no nor and or but if then than so as of in on at to for from by
    with without about into onto over under after before during since until while through between among
    up down out off again also too very just only still even ever really quite rather some any each
    every all both either neither other another such own same more most much many few lot lots
    who whom whose which what when where why how what's whether
    user users user's person someone somebody people
    prefer prefers preferred preferring preference preferences like likes liked liking love loves loved
    enjoy enjoys enjoyed want wants wanted wanting wish wishes need needs needed hate hates hated
    dislike dislikes disliked favourite favorite fond keen interested interest
    plan plans planned planning intend intends intended aim aims hope hopes hoped going gonna
    try tries tried trying decide decides decided consider considers considering think thinks thought
    feel feels felt find finds found believe believes say says said mention mentions mentioned
    share shares shared tell tells told express expresses expressed note notes noted state states stated
    currently recently lately usually often sometimes generally typically regularly always never now
    tend tends tended get gets got make makes made take takes took keep keeps kept
    appreciate appreciates appreciated value values valued encourage encourages encouraged
    emphasize emphasizes emphasized emphasise emphasises emphasised ask asks asked offer offers offered
    appear appears appeared seem seems seemed remain remains remained importance important
    despite toward towards throughout regarding specifically especially particularly able
    name named called known work works worked working job
    profile focus root cause interface behavior behaviour design decision kind
    via per etc yes okay ok
    """.split()
)

MONTHS = {
    m: n
    for n, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for m in names
}
WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())

UNITS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
TENS = {w: 10 * n for n, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), start=2)}
ORDINALS = {
    w: n
    for n, w in enumerate(
        "first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth".split(), start=1
    )
}
NUMBER_WORDS = {**UNITS, **TENS, **ORDINALS, "dozen": 12, "hundred": 100, "thousand": 1000, "twice": 2}

# A short word said that stands for words a memory writes out, when its initials do not give them
# ("sf" and "pm" are read as initials; "cdmx" is not).
ALIASES = {
    "cdmx": "mexico city",
    "nola": "new orleans",
    "philly": "philadelphia",
    "vegas": "las vegas",
    "veggie": "vegetarian",
}
SHORT = range(2, 6)  # the lengths of a said initialism ("sf", "wfh", "GoT")


@dataclass(frozen=True)
class Token:
    """One word or number of a text: as written, and whether it opens a sentence."""

    raw: str
    number: bool
    opens: bool


def tokens(text: str) -> list[Token]:
    """The words and numbers of `text` in order (hyphens, slashes and underscores split words)."""
    text = unicodedata.normalize("NFKC", text)
    out: list[Token] = []
    last = 0
    for m in _TOKEN.finditer(text):
        opens = not out or bool(_SENTENCE_END.search(text[last : m.start()]))
        out.append(Token(m.group(0) if m.group("word") else m.group("num"), m.group("num") is not None, opens))
        last = m.end()
    return out


def bare(word: str) -> str:
    """The word in lower case without a clitic ("user's" -> "user", "don't" -> "not")."""
    word = word.casefold()
    return "not" if word.endswith(("n't", "n’t")) else _CLITIC.sub("", word)


def stem(word: str) -> str:
    """A crude stem: lower case, clitic, then -ies/-ied, -ing, -ed, -es/-s and a final -e cut,
    a doubled last consonant undone ("running" -> "run", "lives" -> "liv", "studies" -> "study")."""
    w = bare(word)
    if len(w) > 4 and w.endswith(("ies", "ied")):
        return w[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if len(w) > len(suffix) + 2 and w.endswith(suffix) and not w.endswith("ss"):
            w = w[: -len(suffix)]
            if suffix in ("ing", "ed") and len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
                w = w[:-1]
            break
    return w[:-1] if len(w) > 3 and w.endswith("e") else w


def number_value(raw: str) -> str:
    """A number as compared: thousands commas dropped, leading zeros dropped, ":00" of a whole hour
    dropped ("1,000" -> "1000", "08" -> "8", "10:00" -> "10")."""
    raw = re.sub(r"(?<=\d),(?=\d{3}\b)", "", raw)
    if re.fullmatch(r"\d+:00", raw):
        raw = raw[:-3]
    return str(int(raw)) if raw.isdigit() else raw


def spoken_numbers(words: list[str]) -> set[str]:
    """The numbers said in words, as digits: "two" -> 2, "forty two" -> 42, "three hundred" -> 300."""
    out: set[str] = set()
    for i, w in enumerate(words):
        value = NUMBER_WORDS.get(w)
        if value is None:
            continue
        nxt = words[i + 1] if i + 1 < len(words) else ""
        if w in TENS and nxt in UNITS:
            value += UNITS[nxt]
        elif nxt in ("hundred", "thousand"):
            value *= NUMBER_WORDS[nxt]
        out.add(str(value))
    return out


LOOSE_NUMBERS = frozenset({"one", "first"})  # a number word that is as often no count at all ("one of", "at first")


def number_words(toks: list[Token]) -> list[tuple[int, str]]:
    """The numbers a text says in words, each once, as (index of its first word, digits): "forty-two"
    is 42 (not 40 and 2), "twelve hundred" 1200; "one" and "first" are left out (`LOOSE_NUMBERS`)."""
    out: list[tuple[int, str]] = []
    words = [bare(t.raw) if not t.number else "" for t in toks]
    i = 0
    while i < len(words):
        w = words[i]
        if w not in NUMBER_WORDS or w in LOOSE_NUMBERS:
            i += 1
            continue
        value, nxt = NUMBER_WORDS[w], words[i + 1] if i + 1 < len(words) else ""
        step = 1
        if w in TENS and nxt in UNITS:
            value, step = value + UNITS[nxt], 2
        elif nxt in ("hundred", "thousand") and w not in ("hundred", "thousand"):
            value, step = value * NUMBER_WORDS[nxt], 2
        out.append((i, str(value)))
        i += step
    return out


@dataclass(frozen=True)
class Said:
    """What a set of messages holds, as grounding looks things up in it."""

    stems: frozenset[str]
    numbers: frozenset[str]
    short: frozenset[str]  # the initialisms said (`_initialism`), in lower case

    @classmethod
    def of(cls, texts: Iterable[str]) -> Said:
        stems: set[str] = set()
        numbers: set[str] = set()
        short: set[str] = set()
        for text in texts:
            toks = tokens(text)
            words = [bare(t.raw) for t in toks if not t.number]
            stems |= {stem(t.raw) for t in toks if not t.number}
            stems |= {stem(w) for said in words if said in ALIASES for w in ALIASES[said].split()}
            numbers |= {number_value(t.raw) for t in toks if t.number} | spoken_numbers(words)
            numbers |= {v[:-3] for v in numbers if v.endswith(":00")}
            short |= {t.raw.casefold() for t in toks if not t.number and _initialism(t.raw)}
        return cls(frozenset(stems), frozenset(numbers), frozenset(short))

    def has_word(self, word: str) -> bool:
        """Whether the word is said: its stem, a related stem (`_related`, both at least four
        letters: "paint" and "painter"), or, for a number word, its digits."""
        s = stem(word)
        if s in self.stems or str(NUMBER_WORDS.get(bare(word), "")) in self.numbers:
            return True
        return len(s) >= 4 and any(_related(s, o) for o in self.stems if len(o) >= 4)

    def initials(self, words: list[str]) -> bool:
        """Whether the words' initials are a short word said ("San Francisco": "sf")."""
        return len(words) in SHORT and "".join(bare(w)[:1] for w in words) in self.short

    def has_number(self, raw: str) -> bool:
        return number_value(raw) in self.numbers


def _initialism(word: str) -> bool:
    """A short word written as initials are: with a capital past its first letter ("GoT", "NYC")
    or without a vowel ("sf", "pm", "wfh", "cdmx")."""
    if len(word) not in SHORT:
        return False
    return any(c.isupper() for c in word[1:]) or not any(c in "aeiouAEIOU" for c in word)


def _related(a: str, b: str) -> bool:
    """One stem begins the other, or they share a beginning of five letters or more that is most
    of the shorter ("analyst" and "analytic")."""
    if a.startswith(b) or b.startswith(a):
        return True
    common = len(os.path.commonprefix([a, b]))
    return common >= 5 and common >= 0.7 * min(len(a), len(b))


CONNECTORS = frozenset({"of", "the", "and", "de", "del", "la", "le", "von", "van"})  # inside a name: "Game of Thrones"


def capitalised(tok: Token) -> bool:
    """A capitalised word that is not framing, a month or a weekday."""
    w = bare(tok.raw)
    return not tok.number and tok.raw[:1].isupper() and w not in FRAMING and w not in MONTHS and w not in WEEKDAYS


def name_runs(toks: list[Token]) -> list[list[int]]:
    """The names of a text as runs of token indices: capitalised words in a row (`capitalised`),
    joined by connectors ("Portland, Oregon", "Game of Thrones"). A capitalised word opening a
    sentence is a name too ("Maria is the user."): what is not framing and is written with a
    capital must be said, wherever it stands."""
    runs: list[list[int]] = []
    run: list[int] = []
    for i, tok in enumerate(toks + [Token("", True, False)]):
        joins = run and bare(tok.raw) in CONNECTORS and i + 1 < len(toks) and capitalised(toks[i + 1])
        if capitalised(tok) or joins:
            run.append(i)
            continue
        if run:
            runs.append(run)
        run = []
    return runs


def is_content(tok: Token) -> bool:
    """A word that states something: not framing, at least three letters."""
    w = bare(tok.raw)
    return not tok.number and len(w) >= 3 and w not in FRAMING
