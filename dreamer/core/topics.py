"""Topic keys: the slot a fact fills (`home_city`, `employer`, `deadline:q3_report` ...), so a new
value meets the one it replaces whatever their wording.

`normalise_topic` makes spelling variants meet (case, spacing, hyphens, plurals and a table of
synonyms); `infer_topic` maps a statement to a topic when its phrasing makes the slot clear
(the rules extractor and agent writes without a topic use it); `describes_present` tells a
statement of a present state ("these days", "currently"). All pure.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

Cardinality = Literal["one", "many"]

MAX_TOPIC_CHARS = 64


@dataclass(frozen=True)
class Topic:
    """A slot: its normalised key, and whether it holds one current value or accumulates many."""

    key: str
    cardinality: Cardinality


# Slots that hold one current value: a newer value replaces the older one.
SINGLE_VALUED = frozenset(
    {
        "home_city",
        "employer",
        "job_title",
        "diet",
        "editor",
        "note_app",
        "timezone",
        "name",
        "age",
        "birthday",
        "partner",
        "relationship_status",
        "operating_system",
        "browser",
        "shell",
        "phone",
        "car",
        "commute",
        "team",
        "email_client",
        "deadline",
    }
)
# Slots whose values accumulate: a new value is kept beside the others.
MANY_VALUED = frozenset({"hobbies", "allergies", "languages", "pets", "children", "skills", "interests"})
# Prefixed keys (`deadline:<thing>`, `favourite_<thing>`, `habit:<thing>`) are single-valued too.
SINGLE_PREFIXES = ("deadline:", "favourite_", "habit:")

ALIASES: dict[str, str] = {
    **dict.fromkeys(
        (
            "city",
            "location",
            "home",
            "home_location",
            "current_city",
            "current_location",
            "lives_in",
            "living_in",
            "live_in",
            "residence",
            "place_of_residence",
            "based_in",
            "home_base",
            "city_of_residence",
            "residence_city",
        ),
        "home_city",
    ),
    **dict.fromkeys(
        (
            "company",
            "workplace",
            "work_place",
            "current_employer",
            "current_company",
            "works_at",
            "work",
            "employment",
            "job_company",
            "organisation",
            "organization",
        ),
        "employer",
    ),
    **dict.fromkeys(
        ("title", "role", "job", "job_role", "position", "occupation", "profession", "current_role"), "job_title"
    ),
    **dict.fromkeys(("diet_type", "dietary_preference", "dietary_choice", "eating_habits", "food_diet"), "diet"),
    **dict.fromkeys(("ide", "code_editor", "text_editor", "preferred_editor", "editor_ide"), "editor"),
    **dict.fromkeys(
        ("notes_app", "note_taking_app", "notes", "note_taking", "notes_tool", "note_tool", "note_taking_tool"),
        "note_app",
    ),
    **dict.fromkeys(("hobby", "pastime", "pastimes"), "hobbies"),
    **dict.fromkeys(("allergy", "allergic_to"), "allergies"),
    **dict.fromkeys(("language", "languages_spoken", "spoken_language", "spoken_languages"), "languages"),
    **dict.fromkeys(("pet",), "pets"),
    **dict.fromkeys(("child", "kids", "kid"), "children"),
    **dict.fromkeys(("skill",), "skills"),
    **dict.fromkeys(("interest",), "interests"),
    **dict.fromkeys(("os",), "operating_system"),
    **dict.fromkeys(("time_zone",), "timezone"),
    **dict.fromkeys(("spouse", "girlfriend", "boyfriend", "wife", "husband"), "partner"),
}
_PREFIXES_DROPPED = ("user_", "users_", "my_", "the_", "current_")
_LEADING_WORDS = re.compile(r"^(?:the|my|our|a|an|his|her|their)_")


def _snake(text: str) -> str:
    text = unicodedata.normalize("NFKC", text).casefold()
    text = re.sub(r"[^\w]+", "_", text)
    return re.sub(r"_+", "_", text).strip("_")


def _canonical(key: str) -> str:
    if key in ALIASES:
        return ALIASES[key]
    for prefix in _PREFIXES_DROPPED:
        if key.startswith(prefix) and (key[len(prefix) :] in ALIASES or _known(key[len(prefix) :])):
            return _canonical(key[len(prefix) :])
    for favourite in ("favorite_", "fav_", "favourites_", "favorites_"):
        if key.startswith(favourite):
            return "favourite_" + key[len(favourite) :]
    if not _known(key):
        singular = key[:-3] + "y" if key.endswith("ies") else key[:-1] if key.endswith("s") else key
        if singular in ALIASES:
            return ALIASES[singular]
        if _known(singular):
            return singular
    return key


def _known(key: str) -> bool:
    return key in SINGLE_VALUED or key in MANY_VALUED


def normalise_topic(raw: str | None) -> str | None:
    """The canonical key of a topic as a model or a person wrote it, or None for none.

    ``"Home City"``, ``"location"`` and ``"lives-in"`` give ``home_city``; ``"Deadline: Q3
    report"`` gives ``deadline:q3_report``; ``"favorite color"`` gives ``favourite_color``."""
    if raw is None:
        return None
    head, sep, tail = raw.partition(":")
    if sep:
        thing = _LEADING_WORDS.sub("", _snake(tail))
        prefix = _snake(head)
        if not prefix or not thing:
            return _snake(head + tail) or None
        return f"{_canonical(prefix)}:{thing}"[:MAX_TOPIC_CHARS]
    key = _snake(raw)
    if not key or key in ("none", "null", "other", "misc", "general"):
        return None
    return _canonical(key)[:MAX_TOPIC_CHARS]


def cardinality_of(key: str | None) -> Cardinality | None:
    """`one` for a known single-valued slot, `many` for a known accumulating one, else None."""
    if key is None:
        return None
    if key in SINGLE_VALUED or key.startswith(SINGLE_PREFIXES):
        return "one"
    if key in MANY_VALUED:
        return "many"
    return None


def topic_of(raw: str | None, cardinality: str | None = None) -> Topic | None:
    """The topic of a stated key and cardinality: a known slot's own cardinality wins, an
    unknown slot takes the one stated (many when none is, so nothing is replaced by guess)."""
    key = normalise_topic(raw)
    if key is None:
        return None
    known = cardinality_of(key)
    if known is not None:
        return Topic(key, known)
    return Topic(key, "one" if cardinality == "one" else "many")


# --------------------------------------------------------------------------- inference from phrasing

# Products by name: a statement naming one is about the slot the product fills.
EDITORS = r"vs ?code|visual studio code|vim|neovim|nvim|emacs|sublime(?: text)?|intellij|pycharm|webstorm|zed|helix|xcode|cursor"
NOTE_APPS = r"notion|obsidian|evernote|onenote|apple notes|logseq|roam(?: research)?|joplin|simplenote|google keep|bear"
_TITLES = (
    r"engineer|developer|designer|manager|analyst|scientist|teacher|nurse|doctor|consultant|architect|"
    r"director|researcher|writer|accountant|lawyer|product owner|cto|ceo|founder|intern|programmer|"
    r"freelancer|cook|chef|barista|cashier|mechanic|pharmacist|electrician|paramedic"
)
EMAIL_CLIENTS = r"outlook|thunderbird|gmail|apple mail|fastmail|proton ?mail|spark|superhuman|mutt"
PHONES = r"iphone(?: \d+)?|pixel \d+[a-z]?|galaxy s\d+|oneplus(?: \d+)?|android phone|fairphone(?: \d)?"
CARS = (
    r"honda|toyota|ford|chevy|chevrolet|bmw|audi|volkswagen|vw|tesla|kia|hyundai|mazda|subaru|nissan|volvo|"
    r"mercedes|peugeot|renault|fiat|skoda|jeep|lexus|porsche|dacia|prius|civic|corolla|camry|rav4|outback"
)
_SWITCH = r"\b(?:switched|switching|moved|migrated|went|gone|going|changed|uses?|using|no longer uses?)\b"
_DEADLINE_THINGS = (
    re.compile(
        r"\bdeadline (?:for|of|on) (?:the |my |our )?(?P<thing>[\w' -]{2,40}?)(?= (?:is|was|has|had|got|moved|"
        r"slipped|changed|now|to|from|will)\b|[,.;]|$)",
        re.I,
    ),
    re.compile(r"\b(?P<thing>[\w'-]+(?: [\w'-]+){0,2}) deadline\b", re.I),
    re.compile(
        r"\b(?:my|our|the|user's|user s) (?P<thing>[\w-]+(?: [\w-]+){0,2}?) (?:is|are|was) (?:now )?"
        r"(?:due\b|(?:on|set for|planned for|scheduled for|moved to|pushed back to|postponed to) (?=\d|(?:jan|feb|mar|apr|may|"
        r"jun|jul|aug|sep|oct|nov|dec|mon|tue|wed|thu|fri|sat|sun|next|the end)))",
        re.I,
    ),
    re.compile(
        r"\b(?:my|our|the|user's|user s) (?P<thing>[\w-]+(?: [\w-]+){0,2}?) (?:got |has been |was )?"
        r"(?:moved|pushed(?: back)?|postponed|delayed|slipped|rescheduled) to\b",
        re.I,
    ),
)
DEADLINE = "deadline"  # the key of a deadline said without what it is for
_NO_THING = frozenset({"deadline", "due_date", "submission_date", "date", "submission", "due"})
_NOT_A_THING = frozenset(
    "i we you they he she it the my our a an this that so think new next final hard user s".split()
)
_FAVOURITE = re.compile(r"\bfavou?rite (?P<x>[a-z]+(?: [a-z]+)?) (?:is|are|was|has become|became|now)\b", re.I)
# Something done, started or stopped: "goes to the gym three times a week", "quit the gym",
# "has started smoking": the later of them is how things stand.
_HABIT = re.compile(
    r"\b(?:goes to|go to|quit|quits|stopped(?: going to)?|gave up|given up|(?:has )?started(?: going to)?) "
    r"(?:the |their |my )?(?P<x>[a-z]+)\b(?! [a-z]+ing\b)",
    re.I,
)
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (key, re.compile(pattern, re.I))
    for key, pattern in (
        ("allergies", r"\ballerg(?:y|ies|ic)\b"),
        ("languages", r"\b(?:speaks?|speaking|fluent in|native speaker of|languages? (?:i|they|he|she) speak)\b"),
        ("hobbies", r"\b(?:hobby|hobbies|pastime|took up|taken up|picked up)\b"),
        ("team", r"\b(?:on|in|joined|moved to|part of) the [\w -]{2,40} team\b"),
        (
            "partner",
            r"\b(?:user's|their) (?:girlfriend|boyfriend|wife|husband|partner|fianc[eé]e?) is\b"
            r"|\bthe user (?:married|got married|got engaged)\b",
        ),
        (
            "home_city",
            r"\b(?:live|lives|living|reside|resides|based|moved|moving|relocated|relocating|settled)"
            r" (?:now )?(?:in|to|out of)\b|\bhome is (?:now )?in\b",
        ),
        (  # a role at a named employer goes stale with the employer: "works as a nurse at Riverside General"
            "employer",
            rf"\b(?:works? as|working as|is an?) [\w -]{{0,40}}\b(?:{_TITLES}) (?:at|for|with) (?:(?-i:[A-Z])|an? |the )",
        ),
        ("job_title", rf"\b(?:works? as|working as|job title|promoted to|became|new role as)\b.*\b(?:{_TITLES})\b"),
        ("job_title", r"\bteach(?:es)? (?:at|high school|middle school|primary school|college|university)\b"),
        ("job_title", rf"\b(?:is|am) (?:now )?an? (?:(?!of\b|for\b)[\w-]+ ){{0,3}}(?:{_TITLES})\.?$"),
        (
            "employer",
            r"\b(?:works?|working|worked) (?:at|for)\b|\b(?:new )?(?:job|position|offer|role) (?:at|with)\b"
            r"|\bemployed (?:at|by)\b|\bhired (?:at|by)\b|\bjoined (?:[A-Z]|a startup|a company|the company)",
        ),
        (
            "diet",
            r"\b(?:vegetarian|vegan|pescatarian|keto|paleo|carnivore|plant-based|diet|dietary|gluten-free|"
            r"dairy-free|lactose-free|celiac|coeliac|halal|kosher)\b"
            r"|\b(?:eats?|eating|ate|eat) (?:meat|fish|seafood|pork|beef|chicken|dairy|eggs)\b",
        ),
        (
            "editor",
            rf"\b(?:editor|ide)\b|\b(?:use|uses|using|switched to|prefer|prefers|moved to|code in|codes in)"
            rf" (?:\w+ )?(?:{EDITORS})\b",
        ),
        ("editor", rf"{_SWITCH}.*\b(?:{EDITORS})\b"),
        (
            "email_client",
            rf"\b(?:e-?mail|mail client)\b.*\b(?:{EMAIL_CLIENTS})\b|{_SWITCH}.*\b(?:{EMAIL_CLIENTS})\b"
            rf"|\b(?:{EMAIL_CLIENTS})\b.*\be-?mail\b",
        ),
        ("phone", rf"\b(?:{PHONES})\b"),
        (
            "car",
            rf"\b(?:{CARS})\b|\b(?:drives?|driving) (?:an?|the) |\b(?:user's|their|my) car is\b"
            r"|\b(?:sold|bought|has|have|got) (?:an?|the|their|my) (?:new |old |used )?car\b",
        ),
        ("note_app", rf"{_SWITCH}.*\b(?:{NOTE_APPS})\b"),
        (
            "note_app",
            rf"\bnotes? app\b|\bnote-taking\b|\b(?:{NOTE_APPS})\b.*\bnotes?\b|\bnotes?\b.*\b(?:{NOTE_APPS})\b",
        ),
    )
)
# Checked first: what the person said does not make a slot's value.
_NOT_A_STATE = re.compile(r"\?\s*$|\b(?:would like to|might|maybe|thinking about|considering|planning to)\b", re.I)


def infer_topic(text: str, kind: str) -> Topic | None:
    """The slot a statement fills, when its phrasing makes it clear; else None.

    "The user moved to Denver" gives ``home_city`` (one); "Sam is allergic to penicillin"
    gives ``allergies`` (many); "The deadline for the Q3 report moved to Friday" gives
    ``deadline:q3_report`` (one). Engineering kinds (root_cause ...) have no personal slot."""
    if kind not in ("preference", "profile", "focus") or _NOT_A_STATE.search(text):
        return None
    if (thing := _deadline_thing(text)) is not None:
        return Topic(f"deadline:{thing}"[:MAX_TOPIC_CHARS] if thing else DEADLINE, "one")
    if m := _FAVOURITE.search(text):
        return Topic(f"favourite_{_snake(m.group('x'))}", "one")
    for key, pattern in _RULES:
        if pattern.search(text):
            return Topic(key, "many" if key in MANY_VALUED else "one")
    if (m := _HABIT.search(text)) and m.group("x").casefold() not in _NOT_A_THING:
        return Topic(f"habit:{m.group('x').casefold()}", "one")
    return None


def _deadline_thing(text: str) -> str | None:
    """What a deadline is for ("the deadline for the Q3 report", "the launch deadline"), snake_case."""
    for pattern in _DEADLINE_THINGS:
        if m := pattern.search(text):
            words = re.sub(r"['’]s\b", "", m.group("thing")).split()  # "the user's thesis" is the thesis
            while words and words[0].casefold() in _NOT_A_THING:
                words = words[1:]
            if words:
                thing = _snake(" ".join(words))
                return "" if thing in _NO_THING else thing
    return None


def same_deadline(a: str, b: str) -> bool:
    """Whether two deadline keys may name one deadline, said in fewer words once it is known:
    a bare deadline ("the deadline moved to May") and any one, or "deadline:exam" and
    "deadline:spanish_exam" (the words of one among the other's). Not two different keys of
    as many words ("deadline:q3_report", "deadline:annual_report")."""
    if a == b:
        return True
    if not (a.startswith(DEADLINE) and b.startswith(DEADLINE)):
        return False
    if DEADLINE in (a, b):
        return True
    words_a, words_b = set(a.removeprefix("deadline:").split("_")), set(b.removeprefix("deadline:").split("_"))
    return words_a < words_b or words_b < words_a


_PRESENT = re.compile(
    r"\b(?:these days|currently|nowadays|at the moment|right now|for now|lately|now|at present|this (?:week|month))\b",
    re.I,
)


def describes_present(text: str, kind: str) -> bool:
    """A statement of a present state (a goal, "these days", "currently", "now"): true until
    told otherwise, so it is shown with the date it was last confirmed."""
    return kind == "focus" or bool(_PRESENT.search(text))


_CHANGE = re.compile(
    r"\b(?:now|no longer|any ?more|these days|nowadays|instead|switched|switching|changed|moved|moving|"
    r"relocated|sold|quit|left|stopped|gave up|given up|dropped|replaced|upgraded|downgraded|accepted|"
    r"promoted|became|become|new (?:job|role|position|team|employer|home|place|city|apartment|flat|house|"
    r"car|phone|laptop|editor|app|diet|deadline|date))\b",
    re.I,
)


def change_words(text: str) -> set[str]:
    """The words by which a statement announces a change ("now", "switched", "no longer" ...)."""
    return {w.casefold() for w in _CHANGE.findall(text)}


def announces_change(text: str) -> bool:
    """Whether a statement says that something changed: "moved to Denver", "no longer eats meat",
    "uses Neovim now". Such a statement is worded away from what it replaces, so it is routed to
    the judge with nearer neighbours than other statements are."""
    return bool(_CHANGE.search(text))
