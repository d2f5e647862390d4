"""The words a text addressing the model is made of, in many languages (pure).

`steering_words.json` holds, for each language, the words of each category the structural
reading (`dreamer.core.trust.steering_reader`) asks about: names of the model (`ai`), role
labels, verbs that set rules aside (`override`), the rules themselves, "previous", "your",
"from now on", claims of authority, verbs that widen what the assistant may do and the
phrases that widen them ("without asking", "anyone"), secret-class data (`private`: a card
number, a password, "my notes"), who reads a note (`reader`), a role without rules (`unbound`),
"word for word" (`verbatim`). An entry is a word or a phrase (words
separated by a space); ``x*`` matches a word that begins with ``x``. Words are matched on
`steering_view.word_view` as whole words (``*x``: a word ending in ``x``, a particle or a suffix), and inside a run of a script written without spaces
(Chinese, Japanese, Thai, ...) as substrings. A word in Arabic or Hebrew script is also matched
without the clitics it may begin with ("and", "the", "to").
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass, field
from functools import cache
from importlib import resources

from dreamer.core.trust.steering_view import word_view

# Scripts written without spaces between words: Thai, Lao, Myanmar, Khmer, kana, CJK.
NO_SPACE = (
    "\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u3005\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
)
# The particles a word in Arabic or Hebrew script may begin with ("and", "the", "to"), by language.
CLITICS: tuple[str, ...] = tuple(
    c
    for words in json.loads(resources.files("dreamer.core.trust").joinpath("clitics.json").read_text("utf-8")).values()
    for c in words
)
_SEMITIC = re.compile("[\u0590-\u05ff\u0600-\u06ff]")


def _marks() -> str:
    """A character class body of the combining marks of the Basic Multilingual Plane (those
    of the scripts written without spaces are read with their runs)."""
    codes = [c for c in range(0x300, 0x10000) if unicodedata.category(chr(c))[0] == "M" and not 0xE00 <= c <= 0xEFF]
    runs: list[list[int]] = []
    for code in codes:
        if runs and code == runs[-1][1] + 1:
            runs[-1][1] = code
        else:
            runs.append([code, code])
    return "".join(f"{chr(a)}-{chr(b)}" for a, b in runs)


_TOKEN = re.compile(f"[{NO_SPACE}]+|(?:[^\\W_{NO_SPACE}]|[{_marks()}])+")
_NO_SPACE_CHAR = re.compile(f"[{NO_SPACE}]")


@dataclass(frozen=True)
class Hit:
    category: str
    start: int
    end: int


@dataclass
class Lexicon:
    """Every language's words, indexed for one pass over a text's tokens."""

    words: dict[str, set[str]] = field(default_factory=dict)
    stems: dict[str, set[str]] = field(default_factory=dict)
    endings: dict[str, set[str]] = field(default_factory=dict)  # "*x": a word ending in x
    phrases: dict[str, list[tuple[tuple[str, ...], bool, str]]] = field(default_factory=dict)
    pairs: dict[tuple[str, ...], list[tuple[tuple[str, ...], bool, str]]] = field(default_factory=dict)
    inside: list[tuple[str, str]] = field(default_factory=list)  # (substring, category)
    longest: int = 0  # the longest stem or ending

    def add(self, category: str, entry: str) -> None:
        prefix, ending = entry.endswith("*"), entry.startswith("*")
        seen = word_view(entry.strip("*"))
        if _NO_SPACE_CHAR.search(seen):
            self.inside.append((seen.replace(" ", ""), category))
            return
        parts = tuple(m.group() for m in _TOKEN.finditer(seen))
        if len(parts) == 2 and prefix:  # "system prompt*": the second word begins with
            self.phrases.setdefault(parts[0], []).append((parts[1:], prefix, category))
        elif len(parts) > 1:
            self.pairs.setdefault(parts[:2], []).append((parts[1:], prefix, category))
        elif parts:
            index = self.endings if ending else self.stems if prefix else self.words
            index.setdefault(parts[0], set()).add(category)
            self.longest = max(self.longest, len(parts[0]) if prefix or ending else 0)

    def _forms(self, token: str) -> list[str]:
        if not _SEMITIC.match(token):
            return [token]
        return [token, *(token[len(c) :] for c in CLITICS if token.startswith(c) and len(token) - len(c) >= 2)]

    def _single(self, forms: list[str]) -> set[str]:
        found: set[str] = set()
        for form in forms:
            found |= self.words.get(form, set())
            for k in range(2, min(len(form), self.longest) + 1):
                found |= self.stems.get(form[:k], set()) | self.endings.get(form[-k:], set())
        return found

    def hits(self, text: str) -> list[Hit]:
        """Where each category's words are in `text` (already a `word_view`)."""
        tokens = [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]
        known: dict[str, tuple[list[str], set[str]]] = {}  # a token's forms and categories, once
        runs: dict[str, list[tuple[str, int, int]]] = {}  # the same for a run written without spaces
        out: list[Hit] = []
        for i, (token, start, end) in enumerate(tokens):
            if _NO_SPACE_CHAR.match(token):
                if token not in runs:
                    runs[token] = self._inside(token)
                out += [Hit(c, start + at, start + at + n) for c, at, n in runs[token]]
                continue
            if token not in known:
                forms = self._forms(token)
                known[token] = (forms, self._single(forms))
            forms, categories = known[token]
            out += [Hit(c, start, end) for c in categories]
            after = tokens[i + 1][0] if i + 1 < len(tokens) else ""
            for form in forms:
                for rest, prefix, category in [*self.pairs.get((form, after), ()), *self.phrases.get(form, ())]:
                    if _follows(tokens, i + 1, rest, prefix):
                        out.append(Hit(category, start, tokens[i + len(rest)][2]))
        return out

    def _inside(self, run: str) -> list[tuple[str, int, int]]:
        """Each category's words inside a run of a script written without spaces: (category,
        where, length)."""
        out = []
        for sub, category in self.inside:
            at = run.find(sub)
            while at >= 0:
                out.append((category, at, len(sub)))
                at = run.find(sub, at + 1)
        return out


def _follows(tokens: list[tuple[str, int, int]], i: int, rest: tuple[str, ...], prefix: bool) -> bool:
    if i + len(rest) > len(tokens):
        return False
    last = len(rest) - 1
    return all(
        tokens[i + k][0].startswith(w) if prefix and k == last else tokens[i + k][0] == w for k, w in enumerate(rest)
    )


@cache
def lexicon() -> Lexicon:
    """The lexicon of `steering_words.json`, loaded once."""
    data = json.loads(resources.files("dreamer.core.trust").joinpath("steering_words.json").read_text("utf-8"))
    lex = Lexicon()
    for words in data.values():
        for category, entries in words.items():
            for entry in entries:
                lex.add(category, entry)
    return lex


def languages() -> list[str]:
    """The languages `steering_words.json` holds words of."""
    data = json.loads(resources.files("dreamer.core.trust").joinpath("steering_words.json").read_text("utf-8"))
    return list(data)
