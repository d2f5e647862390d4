"""Grounded, or not stored: whether a candidate memory rests on the messages it cites, checked
without a model. A small model copies its prompt card's examples or invents names and numbers;
such a candidate is rejected with its reason and never stored.

The rules, in order:
- it cites at least one message it was shown; it is read against those and the message before
  each (which a reply may answer);
- it does not copy one of the card's worked examples with words the session never used;
- every name (a capitalised word inside a sentence) and every number in it is said in the
  session it was shown, is a speaker's name, or is in the user's memory already; a date may be worked out from the day a message it
  is read against was said on ("yesterday" under 8 May 2023 is 7 May 2023);
- at least a third of its content words are said in the messages it is read against (stemmed: "lives"
  meets "living"), or else the caller finds the memory close enough to one of them in embedding space
  (`settle`): the memory's own words for what was said are kept, a name or a number it made up
  never is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from dreamer.core.trust.grounding_words import (
    CONNECTORS,
    MONTHS,
    SHORT,
    Said,
    Token,
    bare,
    is_content,
    name_runs,
    stem,
    tokens,
)

UNGROUNDED = "ungrounded"
NO_CITED = f"{UNGROUNDED}: no cited message"
COPIES_EXAMPLE = f"{UNGROUNDED}: copies the card's example"
MIN_SHARE = 1 / 3  # the share of a candidate's content words the messages it is read against must say
EXAMPLE_OVERLAP = 0.7  # the share of words a candidate shares with an example to count as its copy
DATE_DAYS = 31  # how far a date worked out from when a message was said may lie from that day
YEAR_SPAN = 1  # and a year ("last year", "next year") from that day's year
SHOWN_WORDS = 4  # the missing words a reason names


@dataclass(frozen=True)
class Message:
    """A line of the session the extraction call showed: its number, its text, the day it was said
    on, and whether it was context only (read before the cursor: never cited)."""

    seq: int
    text: str
    day: date | None = None
    context: bool = False


@dataclass(frozen=True)
class Verdict:
    """Whether a candidate is grounded; when not, why (`reason`). `loose`: only content words are
    missing, so a memory close enough to a cited message in embedding space is grounded still."""

    reason: str | None = None
    loose: bool = False
    unsaid: tuple[str, ...] = ()  # the names and numbers the session never gave

    @property
    def grounded(self) -> bool:
        return self.reason is None


GROUNDED = Verdict()


def check(
    text: str,
    seqs: Sequence[int],
    lines: Sequence[Message],
    *,
    speakers: Sequence[str] = (),
    examples: Sequence[str] = (),
    known: Sequence[str] = (),
) -> Verdict:
    """The verdict on a candidate's `text` citing `seqs`, against the `lines` of its session the
    call showed (in order), the `speakers`' names, the prompt card's `examples` and what the
    user's memory already holds (`known`, texts). A name or a number is looked up in all the
    lines and in `known` (a model may cite the wrong line for a name it heard, and an update
    names what it updates: "the Spanish exam moved" where only "the exam" was said);
    content words in the messages it is read against (`read_for`), where at least `MIN_SHARE` of
    them must be said."""
    read = read_for(seqs, lines)
    if not read:
        return Verdict(NO_CITED)
    toks = tokens(text)
    heard = Said.of([*(m.text for m in lines), *speakers, *known])
    if copies_example(toks, examples, heard):
        return Verdict(COPIES_EXAMPLE)
    days = [m.day for m in read if m.day is not None]
    runs = name_runs(toks)
    made_up = [_name(run, toks) for run in runs if not _said_name(run, toks, heard)]
    made_up += [t.raw for i, t in enumerate(toks) if t.number and not _a_number(i, toks, heard, days)]
    if made_up:
        return Verdict(f"{UNGROUNDED}: {quoted(made_up)} not in the session", unsaid=tuple(made_up))
    said = Said.of([m.text for m in read])
    named = {k for run in runs if _said_name(run, toks, said) for k in run}  # in full, in part or as initials
    who = {stem(w) for name in speakers for w in name.split()}  # a speaker's name frames, as "the user" does
    content = list({stem(t.raw): i for i, t in enumerate(toks) if is_content(t) and stem(t.raw) not in who}.values())
    missing = [
        toks[i].raw
        for i in content
        if i not in named and not said.has_word(toks[i].raw) and not _initialled(i, toks, said)
    ]
    if len(missing) <= (1 - MIN_SHARE) * len(content):
        return GROUNDED
    return Verdict(f"{UNGROUNDED}: {quoted(missing)} not in {messages(m.seq for m in read)}", loose=True)


def read_for(seqs: Sequence[int], lines: Sequence[Message]) -> list[Message]:
    """The messages a candidate citing `seqs` is read against, in order: each cited message the
    call showed (not a context line) and the message before it, which it may answer (a user's
    "Good idea." takes up the suggestion before it). None when it cites no line shown."""
    cited = set(seqs)
    keep = {k - j for k, m in enumerate(lines) if m.seq in cited and not m.context for j in (0, 1) if k - j >= 0}
    return [lines[k] for k in sorted(keep)]


def settle(verdict: Verdict, similarity: float | None, threshold: float) -> Verdict:
    """A loose verdict grounded when the memory's `similarity` to its nearest cited message reaches
    `threshold`; else the verdict as it was, its reason giving the similarity when there is one."""
    if verdict.grounded or not verdict.loose or similarity is None:
        return verdict
    if similarity >= threshold:
        return GROUNDED
    shown = math.floor(similarity * 1000) / 1000  # never rounded up to the threshold it missed
    return Verdict(f"{verdict.reason} (similarity {shown:.3f} < {threshold:g})", loose=True)


def _said_name(run: list[int], toks: list[Token], said: Said) -> bool:
    """Whether a name is said: one of its capitalised words ("Portland, Oregon" for "portland",
    "Kia Niro" for "niro"), or its initials ("San Francisco" for "sf", "Game of Thrones" for "GoT")."""
    words = [toks[k].raw for k in run]
    capitals = [w for w in words if bare(w) not in CONNECTORS]
    return any(said.has_word(w) for w in capitals) or said.initials(words) or said.initials(capitals)


def _name(run: list[int], toks: list[Token]) -> str:
    return " ".join(toks[k].raw for k in run)


def _initialled(i: int, toks: list[Token], said: Said) -> bool:
    """Whether word `i` is one of a few words in a row whose initials are said ("product manager"
    for "pm", "works from home" for "wfh")."""
    for size in SHORT:
        for start in range(max(0, i - size + 1), i + 1):
            window = toks[start : start + size]
            if len(window) == size and not any(t.number for t in window) and said.initials([t.raw for t in window]):
                return True
    return False


def _a_number(i: int, toks: list[Token], said: Said, days: list[date]) -> bool:
    """Whether number `i` is said in the session, or is a date a message's day yields."""
    return said.has_number(toks[i].raw) or _a_date(i, toks, said, days)


def copies_example(toks: list[Token], examples: Sequence[str], session: Said) -> bool:
    """Whether the candidate is one of the card's `examples` (most of its words the same) and has
    a content word the session never used."""
    words = {bare(t.raw) for t in toks}
    if not words or all(session.has_word(t.raw) for t in toks if is_content(t)):
        return False
    for example in examples:
        theirs = {bare(t.raw) for t in tokens(example)}
        if theirs and len(words & theirs) / len(words | theirs) >= EXAMPLE_OVERLAP:
            return True
    return False


def messages(seqs: Iterable[int]) -> str:
    """ "message 3" or "messages 3, 4"."""
    numbers = sorted(set(seqs))
    return f"message{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"


def quoted(words: list[str]) -> str:
    """The first `SHOWN_WORDS` distinct words, quoted: "'Leeds', '42'" (and "and 2 more")."""
    distinct = list(dict.fromkeys(words))
    shown = ", ".join(f"'{w}'" for w in distinct[:SHOWN_WORDS])
    more = len(distinct) - SHOWN_WORDS
    return f"{shown} and {more} more" if more > 0 else shown


def _months_near(i: int, toks: list[Token]) -> list[int]:
    near = [toks[j] for j in (i - 1, i + 1) if 0 <= j < len(toks) and not toks[j].number]
    return [MONTHS[bare(t.raw)] for t in near if bare(t.raw) in MONTHS]


def _near(day: date, when: date) -> bool:
    return abs((when - day).days) <= DATE_DAYS


def _a_date(i: int, toks: list[Token], said: Said, days: list[date]) -> bool:
    """Whether number `i` is a day of a month or a year that can be worked out from the days the
    cited messages were said on: a date within `DATE_DAYS` of one, a year within `YEAR_SPAN` of
    one's year, or as many years from it as a cited message counts ("three years ago")."""
    raw = toks[i].raw
    if not raw.isdigit() or not days:
        return False
    value = int(raw)
    if 1900 <= value <= 2100:
        counted = {int(n) for n in said.numbers if n.isdigit() and int(n) <= 100} if said.has_word("year") else set()
        return any(abs(value - d.year) <= YEAR_SPAN or abs(value - d.year) in counted for d in days)
    for month in _months_near(i, toks):
        for d in days:
            for year in (d.year - 1, d.year, d.year + 1):
                try:
                    if _near(d, date(year, month, value)):
                        return True
                except ValueError:
                    continue
    return False
