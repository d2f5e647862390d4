"""Whether a candidate memory copies the prompt it was asked with rather than the conversation:
a small model writes back its card's rubric ("Maria's daughter plays the violin"), a worked
example, or a line of the transcript instructions ("Maria is the user."), often with words
added or changed. Pure: the prompt's texts are handed in, no model, no I/O.

A candidate copies the prompt when it holds a run of `SPAN` words in a row of a prompt text, or
most (`CLAUSE_SHARE`) of the words of one of its clauses, and as many of the clause's content
words, in any order (a copy lengthened or edited), and among the words it shares with that run or clause is a content word the
conversation never said. The words a conversation says are no copy, even where a card says them too.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from dreamer.core.trust.grounding_words import Said, Token, is_content, number_value, stem, tokens

SPAN = 5  # words in a row of a prompt text that make a copy
CLAUSE_SHARE = 0.75  # of a prompt clause's words, the share a candidate holding them copies
MIN_CLAUSE = 3  # words a clause has at least to be held against a candidate
_CLAUSE_END = re.compile(r"[.;:!?()\[\]{}<>\"`\n,=|#*]+|\s-\s")


def word_key(tok: Token) -> str:
    """A word as copies are compared: its stem; a number its value."""
    return number_value(tok.raw) if tok.number else stem(tok.raw)


@dataclass(frozen=True)
class Clause:
    """A clause of a prompt text: all its words, and those that state something (`is_content`)."""

    words: frozenset[str]
    content: frozenset[str]


@dataclass(frozen=True)
class Prompt:
    """The texts a model was prompted with, as copies are looked for in them: every run of
    `SPAN` words in a row, and every clause of `MIN_CLAUSE` words or more."""

    spans: frozenset[tuple[str, ...]]
    clauses: tuple[Clause, ...]

    @classmethod
    def of(cls, texts: Iterable[str]) -> Prompt:
        spans: set[tuple[str, ...]] = set()
        clauses: dict[frozenset[str], Clause] = {}
        for text in texts:
            keys = [word_key(t) for t in tokens(text)]
            spans |= {tuple(keys[i : i + SPAN]) for i in range(len(keys) - SPAN + 1)}
            for part in _CLAUSE_END.split(text):
                toks = tokens(part)
                words = frozenset(word_key(t) for t in toks)
                if len(words) >= MIN_CLAUSE:
                    clauses[words] = Clause(words, frozenset(word_key(t) for t in toks if is_content(t)))
        return cls(frozenset(spans), tuple(clauses.values()))


EMPTY = Prompt(frozenset(), ())


def copies_prompt(toks: list[Token], prompt: Prompt, heard: Said) -> bool:
    """Whether the candidate of `toks` copies `prompt` (a run of its words in a row, or most of a
    clause's words) with a content word the conversation (`heard`) never said among those it copies."""
    keys = [word_key(t) for t in toks]
    unsaid = {keys[i] for i, t in enumerate(toks) if is_content(t) and not heard.has_word(t.raw)}
    if not unsaid:
        return False
    for i in range(len(keys) - SPAN + 1):
        run = tuple(keys[i : i + SPAN])
        if run in prompt.spans and unsaid & set(run):
            return True
    held = set(keys)
    for clause in prompt.clauses:
        shared, content = clause.words & held, clause.content & held
        if len(shared) < CLAUSE_SHARE * len(clause.words) or len(content) < CLAUSE_SHARE * len(clause.content):
            continue
        if unsaid & content:
            return True
    return False
