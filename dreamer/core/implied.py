"""Changes said without the old words: which stored memory a statement may change although the
two share little wording, so the pair reaches the judge. Pure: texts in, the reason out.

Four shapes, each read from the statement and checked against one stored memory:

* **an ending**: "done with TAing", "no longer on keto", "handed in my notice", "finished the
  course" goes to a memory that mentions what ended ("TAs the intro course", "follows keto", a
  job);
* **a count of the same thing**: "the team grew to 11" and "a team of 8", "10,000 beta users"
  and "2,000 beta users": two numbers that differ, said of a word both share;
* **a value of the same kind**: "fully migrating to GCP" and "runs on AWS", "switched us to
  Svelte" and "the frontend is in Vue": two names of one kind (a cloud, a framework, a
  database, a programming language), not the same one;
* **a job elsewhere**: "accepted a job in Austin" also reaches where the user lives;
* **a completion**: "passed the driving test", "the amendment was approved", "we launched" goes
  to a memory of something still to come that both name ("the driving test is on 12 May", "the
  amendment is pending").

Routing only: without a judge nothing here retires a memory, and with one it decides.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from dreamer.core.expiry import resolve_time
from dreamer.core.own_change import not_own_change, whose_change
from dreamer.core.topics import announces_change, cardinality_of

_WORD = re.compile(r"[^\W\d_][\w'-]*", re.UNICODE)
_SUFFIXES = ("ing", "ed", "es", "er", "s")
_STOP = frozenset(
    "a an the and or but of to in on at for with from by as is are was were be been being it its this that "
    "these those their them they he she his her i me my we our you your user user's users has have had do does "
    "did not no now so than then there here very just also still about into over after before again all any "
    "some more most other only own same too can will fully finally officially totally completely basically "
    "done with longer quit quitting finished finishing stopped stopping ended ending left leaving handed notice "
    "gave given up over grew grown shrank shrunk went gone got get new old now our".split()
)
_ENDING = re.compile(
    r"\b(?:(?:i'?m|i am|we'?re|we are|is|are|am|the user is)\s+)?(?:done with|finished(?: with)?|through with|"
    r"no longer(?: doing| on| at| with| in| using| a| an)?|not (?:doing|on|at|using) .{0,20}? any ?more|"
    r"quit(?:ting)?|stopped|gave up(?: on)?|given up(?: on)?|left|leaving|wrapped up|dropped out of|dropped)"
    r"\s+(?P<thing>[^.,;!?]{2,60})",
    re.I,
)
_NOTICE = re.compile(
    r"\b(?:handed in|gave|given|put in|turned in)\s+(?:my|his|her|their|the user's)?\s*notice\b"
    r"|\bfreelanc(?:e|er|ing)\b|\bself-employed\b"
    r"|\b(?:started|starting|runs?|opened) (?:my|his|her|their|the user's|a|an) own (?:business|company|practice|studio)\b",
    re.I,
)
_JOB_WORDS = re.compile(
    r"\b(?:work|works|working|job|employ|employer|employed|company|position|role|team|agency|firm|studio|"
    r"office|clinic|hospital|school|hired|for an? [\w-]+ (?:called|named))\b",
    re.I,
)
_COUNT = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*(k|m|thousand|million)?\b", re.I)
_JOB_ELSEWHERE = re.compile(
    r"\b(?:job|offer|position|role|post|transfer|relocation|placement|residency)\b[^.;]{0,40}?\b(?:in|to)\s+"
    r"(?-i:[A-Z][\w-]+)|\b(?:transferr?(?:ed|ing)|relocat(?:ed|ing)) (?:me |us )?to (?-i:[A-Z])",
    re.I,
)
KINDS: dict[str, str] = {
    "cloud": r"aws|amazon web services|gcp|google cloud(?: platform)?|azure|digitalocean|digital ocean|heroku|"
    r"vercel|netlify|fly\.io|linode|hetzner|oracle cloud|ibm cloud|cloudflare workers|on-prem(?:ises)?",
    "framework": r"react|vue(?:\.js)?|svelte(?:kit)?|angular|solid(?:js)?|next\.js|nuxt|remix|ember|jquery|"
    r"django|flask|fastapi|rails|ruby on rails|laravel|spring boot|express|phoenix|htmx",
    "database": r"postgres(?:ql)?|mysql|mariadb|mongo(?:db)?|sqlite|dynamodb|cassandra|snowflake|bigquery|"
    r"redshift|oracle db|sql server|supabase|firebase|couchdb|neo4j|clickhouse",
    "language": r"python|java|golang|rust|typescript|javascript|kotlin|swift|ruby|php|scala|elixir|haskell|"
    r"c\+\+|c#|clojure|dart|julia|perl|ocaml|zig",
}
_TIMES = frozenset({"day", "week", "month", "year", "time", "hour", "minute"})
_KIND_PATTERNS = {kind: re.compile(rf"(?<![\w.+#-])(?:{names})(?![\w+#-])", re.I) for kind, names in KINDS.items()}


def _base(word: str) -> str:
    word = word.casefold().strip("'-")
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and not word.endswith(("ss", "is", "us")) and len(word) - len(suffix) >= 2:
            return word[: -len(suffix)]
    return word


def content_words(text: str, *, names: bool = True, lead: bool = True) -> set[str]:
    """The words of a text that say what it is about, each cut to its base ("TAing" and "TAs" both
    give "ta"); stop words and the words that announce a change left out, and without `names`
    the capitalised ones too (who or what a statement is about, shared by all it says of them),
    but for a sentence's first word, capitalised as any first word is ("Team grew to 11"), unless
    not `lead` (a name as often as not: "Caroline is now ...")."""
    out = set()
    for m in _WORD.finditer(text):
        w = m.group(0)
        first = lead and (not text[: m.start()].strip(" \t\n\"'(") or text[: m.start()].rstrip()[-1:] in ".!?;:")
        if w.casefold() not in _STOP and len(w) > 1 and (names or first or not w[0].isupper()):
            out.add(_base(w))
    return out


def ended_thing(text: str) -> set[str] | None:
    """What a statement says has ended, as content words; a notice handed in ends a job."""
    if _NOTICE.search(text):
        return {"job"}
    m = _ENDING.search(text)
    if m is None or re.match(r"(?:a|an|one|another)\s", m.group("thing"), re.I):
        return None  # "finished a painting" completes one thing, it ends no state
    return content_words(m.group("thing")) or None


_UNITS = "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen".split()
_NUMBER_WORDS = {
    **{w: float(i) for i, w in enumerate(_UNITS)},
    **{w: float(i) for i, w in enumerate("sixteen seventeen eighteen nineteen".split(), start=16)},
    **{w: float(10 * i) for i, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)},
    "a dozen": 12.0,
    "dozen": 12.0,
    "a hundred": 100.0,
    "hundred": 100.0,
    "a couple of": 2.0,
    "a pair of": 2.0,
}
_SAID_NUMBER = re.compile(rf"\b(?:{'|'.join(sorted(_NUMBER_WORDS, key=len, reverse=True))})\b", re.I)


def counts(text: str) -> set[float]:
    """The numbers a statement says, "2,000" and "2k" alike, in words too ("six", "a dozen"); a
    range ("8-10", "between 8 and 10") says each of its ends."""
    out = set()
    for number, scale in _COUNT.findall(text.replace("\u2013", "-")):
        value = float(number.replace(",", ""))
        out.add(value * {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6}.get(scale.casefold(), 1))
    out |= {_NUMBER_WORDS[m.group(0).casefold()] for m in _SAID_NUMBER.finditer(text)}
    return out


_FROM_TO = re.compile(
    r"\bfrom\s+(?P<old>[^.,;!?]+?)\s+(?:to|for|with)\s+(?P<new>[^.,;!?]+)"
    r"|\b(?:to|for)\s+(?P<new2>[^.,;!?]+?)\s+from\s+(?P<old2>[^.,;!?]+)",
    re.I,
)


def change_sides(text: str) -> tuple[str, str] | None:
    """(old value, new value) of a statement that names both: "switched from Vue to Svelte",
    "migrating to GCP from AWS"; None for one that does not."""
    m = _FROM_TO.search(text)
    if m is None:
        return None
    if m.group("old") is not None:
        return m.group("old"), m.group("new")
    return m.group("old2"), m.group("new2")


# Names that are ordinary words too ("react to", "express her feelings"): a name only capitalised.
_WORDS_TOO = frozenset(
    "react express remix ember phoenix rails swift rust ruby julia dart perl solid spring flask java go zig "
    "spark oracle".split()
)


def named(text: str) -> dict[str, set[str]]:
    """The names of each kind a statement says: {"cloud": {"gcp"}}."""
    out: dict[str, set[str]] = {}
    for kind, pattern in _KIND_PATTERNS.items():
        found = {
            m.group(0).casefold()
            for m in pattern.finditer(text)
            if not m.group(0)[0].islower() or m.group(0).split()[0] not in _WORDS_TOO
        }
        if found:
            out[kind] = found
    return out


def implied_slots(text: str) -> set[str]:
    """Slots a statement reaches without naming them: a job in another city reaches `home_city`."""
    return {"home_city"} if _JOB_ELSEWHERE.search(text) else set()


def implied_reason(text: str, stored: str, stored_topic: str | None = None) -> str | None:
    """Why `text` may change the memory `stored` though their words differ, or None."""
    if stored_topic is not None and stored_topic in implied_slots(text):
        return f"a job elsewhere reaches {stored_topic}"
    thing, words = ended_thing(text), content_words(stored)
    job = stored_topic in ("employer", "job_title") or _JOB_WORDS.search(stored)
    if thing and (thing & words or ("job" in thing and job)):
        return "an ending of what it mentions"
    sides = change_sides(text)
    new, old = counts(sides[1] if sides else text), counts(stored)
    shared = (content_words(text, names=False) & content_words(stored, names=False)) - _TIMES
    if new and old and not new & old and shared and (announces_change(text) or _grew(text) or sides):
        return f"another count of {sorted(shared)[0]}"
    theirs = named(stored)
    for kind, names in named(sides[1] if sides else text).items():
        if kind in theirs and names != theirs[kind] and not names & theirs[kind]:
            return f"another {kind}"
    if _COMPLETED.search(text) and shared and _awaited(stored):
        return f"a completion of its {sorted(shared)[0]}"
    changed = _CHANGED.search(text)
    subject = content_words(text[: changed.start()], names=False, lead=False) & shared if changed else set()
    if subject:  # what changed is what the statement is about: "the thesis pivoted to ..."
        return f"a change to its {sorted(subject)[0]}"
    return None


_COMPLETED = re.compile(
    r"\b(?:passed|got (?:the|a|an|my|their|his|her)\b|(?:was|were|got|been) (?:approved|granted|accepted)|"
    r"approved|granted|launched|went live|shipped|filed|submitted|handed in|defended|finished|completed)\b",
    re.I,
)
# A day a memory says something is due, set or planned for (an open state is `Expiry.provisional`).
_AHEAD = re.compile(
    r"\b(?:appointment|interview|exam|test|deadline|due|scheduled|upcoming|"
    r"next|will|(?:is|are) (?:on|set for|planned for|booked for)|running|taking|sitting)\b",
    re.I,
)


_ANY_DAY = datetime(2000, 1, 3, tzinfo=UTC)  # whether a text names a time, not which: any day will do


def _awaited(stored: str) -> bool:
    """Whether a memory says something still to come: a day, an open state ("pending")."""
    found = resolve_time(stored, _ANY_DAY)
    return found is not None and (found.provisional or (found.until is not None and bool(_AHEAD.search(stored))))


_CHANGED = re.compile(
    r"\b(?:pivot(?:ed|ing)?|shift(?:ed|ing)|switch(?:ed|ing)|chang(?:ed|ing)|migrat(?:ed|ing)|mov(?:ed|ing)"
    r"|replac(?:ed|ing)|swapp?(?:ed|ing)|turned into|is now|are now|now (?:is|are|uses?|runs?|focus(?:es)?|works?))\b",
    re.I,
)


def _grew(text: str) -> bool:
    return bool(
        re.search(r"\b(?:grew|grown|growing|shrank|shrunk|is at|are at|up to|down to|hit|reached)\b", text, re.I)
    )


def implied_query(text: str) -> str | None:
    """Words to find the memories a statement may change by, beyond its nearest ones: what ended,
    the names of the other values of its kind."""
    words: list[str] = []
    if thing := ended_thing(text):
        words += sorted(thing)
    for kind in named(text):
        words += [re.sub(r"\(\?:[^)]*\)\??|\\", "", alt) for alt in KINDS[kind].split("|")]
    return " ".join(dict.fromkeys(words)) or None


def pair_grounds(new: str, old_topic: str | None, user_name: str | None = None) -> str | None:
    """What the store reads between a routed pair without a model, for the judge to weigh: why
    NEW is no change of the user's own (`whose_change`: someone else's, a hypothetical, a plan
    called off ...), and for OLD's single-valued slot also an event that moved, a look-alike word
    or no value of the slot's kind (`not_own_change`)."""
    if old_topic is not None and cardinality_of(old_topic) == "one":
        return not_own_change(new, old_topic, user_name)
    return whose_change(new, user_name)
