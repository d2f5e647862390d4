"""Grounded, or not stored: whether a candidate memory rests on the messages it cites, checked
without a model. A small model copies its prompt, invents names and numbers, or writes a bare
name; such a candidate is rejected with its reason and never stored.

The contract, in order:
- it cites at least one message it was shown; it is read against those and the message before
  each (which a reply may answer);
- it copies no span of the prompt (`prompt_copy`: the cards, their examples, the transcript
  instructions, also lengthened or edited) with a word the session never used;
- every name (a capitalised word, the one opening a sentence too, in any inflection: "Maria's")
  and every number (digits or words: "two", "forty-two") in it is said in the messages it is
  read against, is a speaker's name or a role, or is in the user's memory
  already; a date may be worked out from the day one of them was said on ("yesterday" under
  8 May 2023 is 7 May 2023);
- it states something beyond a name: a bare name ("Jolene", "The user is Jolene." where Jolene
  speaks), a sentence of framing words only ("The user likes it.") or a question is rejected;
  the user's name said by a user who speaks as "user" ("The user's name is Dana.") is a fact;
- most of its content words (`MOST`, a name said counting as one) are said in the messages it is read against
  (stemmed: "lives" meets "living"). With at least `MIN_SHARE` of them said, the caller may
  confirm the rest as a paraphrase when the memory lies close enough to one of those messages
  in embedding space (`settle`); with fewer, similarity never stands in for what was said.
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
    number_words,
    stem,
    tokens,
)
from dreamer.core.trust.prompt_copy import EMPTY, Prompt, copies_prompt

UNGROUNDED = "ungrounded"
NO_CITED = f"{UNGROUNDED}: no cited message"
COPIES_PROMPT = f"{UNGROUNDED}: copies the prompt"
BARE_NAME = f"{UNGROUNDED}: nothing beyond a name"
SAYS_NOTHING = f"{UNGROUNDED}: states nothing"
ASKS = f"{UNGROUNDED}: a question, states nothing"
MOST = 1 / 2  # at least this share of a candidate's content words said: grounded
MIN_SHARE = 1 / 3  # at least this share said: similarity may confirm the rest as a paraphrase
NEVER_SAID = "never said in the lines it cites"  # ends the reason of a name or number made up
ROLES = ("user", "assistant", "tool")  # who may speak a line, names aside
# What may stand beside a name in a candidate that says nothing else ("The user is Jolene.", "My name: Jolene")
FILLER = frozenset(
    "a an the this that is was are am be i me my it its user person speaker name named called and or".split()
)
IDENTITY = frozenset(
    "user name named called".split()
)  # "The user's name is Dana.": who the user is, when no speaker says
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
    missing, and no more than a paraphrase leaves out (at least `MIN_SHARE` said), so a memory
    close enough to a cited message in embedding space is grounded still."""

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
    prompt: Prompt = EMPTY,
    known: Sequence[str] = (),
) -> Verdict:
    """The verdict on a candidate's `text` citing `seqs`, against the `lines` of its session the
    call showed (in order), the `speakers`' names, the `prompt` the model was asked with and what
    the user's memory already holds (`known`, texts). A name or a number is looked up in the
    messages it is read against (`read_for`), the speakers' names and `known` (an update names
    what it updates: "the Spanish exam moved" where only "the exam" was said), as are its content
    words, in those messages alone; a copy of the prompt is one with a word the whole session never said."""
    read = read_for(seqs, lines)
    if not read:
        return Verdict(NO_CITED)
    if text.rstrip().rstrip("\"'’”)").endswith("?"):
        return Verdict(ASKS)
    toks = tokens(text)
    if copies_prompt(toks, prompt, Said.of([*(m.text for m in lines), *speakers, *ROLES, *known])):
        return Verdict(COPIES_PROMPT)
    heard = Said.of([*(m.text for m in read), *speakers, *ROLES, *known])
    days = [m.day for m in read if m.day is not None]
    runs = name_runs(toks)
    made_up = [_unsaid(run, toks, heard) for run in runs if not _said_name(run, toks, heard)]
    made_up += [t.raw for i, t in enumerate(toks) if t.number and not _a_number(i, toks, heard, days)]
    made_up += [toks[i].raw for i, value in number_words(toks) if not heard.has_number(value)]
    if made_up:
        return Verdict(f"{UNGROUNDED}: {quoted(made_up)} {NEVER_SAID}", unsaid=tuple(made_up))
    return _content(toks, runs, read, speakers)


def _content(toks: list[Token], runs: list[list[int]], read: list[Message], speakers: Sequence[str]) -> Verdict:
    """The verdict on what a candidate states beyond its names: something (a bare name or framing
    alone is rejected), most of it said in the messages it is read against (`read`)."""
    said = Said.of([m.text for m in read])
    in_names = {k for run in runs for k in run}
    named = {k for run in runs if _said_name(run, toks, said) for k in run}  # in full, in part or as initials
    who = {stem(w) for name in speakers for w in name.split()}  # a speaker's name frames, as "the user" does
    content = list({stem(t.raw): i for i, t in enumerate(toks) if is_content(t) and stem(t.raw) not in who}.values())
    if not content and not runs and not any(t.number for t in toks) and not number_words(toks):
        return Verdict(SAYS_NOTHING)
    if runs and all(k in in_names or bare(t.raw) in FILLER for k, t in enumerate(toks)):
        names_the_user = any(bare(t.raw) in IDENTITY for t in toks)
        if not names_the_user or all(stem(toks[k].raw) in who for k in in_names):
            return Verdict(BARE_NAME)
    missing = [
        toks[i].raw
        for i in content
        if i not in named and not said.has_word(toks[i].raw) and not _initialled(i, toks, said)
    ]
    if len(missing) <= (1 - MOST) * len(content):
        return GROUNDED
    where = messages(m.seq for m in read)
    return Verdict(
        f"{UNGROUNDED}: {quoted(missing)} not in {where}", loose=len(missing) <= (1 - MIN_SHARE) * len(content)
    )


KINDS = {  # why a candidate was refused, in a word or two, for a figure
    NO_CITED: "cites no line shown",
    COPIES_PROMPT: "copies the prompt",
    BARE_NAME: "a bare name",
    SAYS_NOTHING: "states nothing",
    ASKS: "states nothing",
}
UNSAID = "names or numbers never said"
WORDS = "its words not said"


def reason_kind(reason: str) -> str:
    """The kind of a rejection's `reason`, for counting: one of `KINDS`' values, `UNSAID` or
    `WORDS` for an ungrounded one, the reason itself for any other (over the cap, screened)."""
    if not reason.startswith(UNGROUNDED) or reason in KINDS:
        return KINDS.get(reason, reason)
    return UNSAID if reason.endswith(NEVER_SAID) else WORDS


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
    """Whether a name is said: each of its capitalised words ("Maria's" as "Maria"; "Valencia,
    Spain" needs "Spain" said too), or its initials ("San Francisco" for "sf", "Game of Thrones"
    for "GoT")."""
    words = [toks[k].raw for k in run]
    capitals = [w for w in words if bare(w) not in CONNECTORS]
    return all(said.has_word(w) for w in capitals) or said.initials(words) or said.initials(capitals)


def _unsaid(run: list[int], toks: list[Token], said: Said) -> str:
    """What of a name is not said: its capitalised words never said ("Spain" of "Valencia, Spain"),
    the whole name when none is."""
    words = [toks[k].raw for k in run if bare(toks[k].raw) not in CONNECTORS and not said.has_word(toks[k].raw)]
    return " ".join(words) or " ".join(toks[k].raw for k in run)


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
