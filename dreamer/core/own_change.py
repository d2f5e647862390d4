"""Whether a statement that fills a single-valued slot changes the user's own value, read without
a model. Without a judge, a slot's newer value retires the older one; these are the shapes in
which that was a guess that deleted a true fact: another person's change ("my dad finally
switched to an iPhone" is not the user's phone), an event that moved ("the school moved the staff
meeting to Thursday" is not a move of home), and a word that only looks like the slot
("turn-based" is not "based in"). Pure: text in, the reason it is no change of the user's out.
"""

from __future__ import annotations

import re

from dreamer.core.expiry import MONTHS, WEEKDAYS

OTHERS = (
    "dad|father|mum|mom|mother|parents?|sister|brother|siblings?|flatmate|roommate|housemate|"
    "colleagues?|co-?workers?|boss|manager|friends?|partner|wife|husband|girlfriend|boyfriend|fianc[ée]e?|"
    "son|daughter|kids?|children|neighbou?rs?|cousin|aunt|uncle|grand(?:ma|pa|mother|father|parents?)|"
    "landlord|landlady|teacher|students?|clients?|customers?|family|"
    "in-laws|nephew|niece|dog|cat"
)
EVENTS = (
    "meeting|appointment|class|lesson|exam|test|deadline|call|party|session|lecture|match|game|flight|"
    "interview|shift|date|event|dinner|lunch|breakfast|wedding|launch|review|demo|standup|stand-up|"
    "presentation|workshop|conference|trip|visit|concert|show|training|practice|rehearsal|reservation|booking"
)
# Whose statement it is: its subject names a person other than the user (not "my partner and I";
# an organisation's statement, "the team grew to 11", may well be the user's own slot).
_SOMEONE_ELSE = re.compile(
    rf"^\W*(?:(?:the\s+)?user'?s|my|our|his|her|their|the|a|an)\s+(?:[\w-]+\s+){{0,2}}?(?:{OTHERS})\b(?!\s*'s)(?!\s+and\s+(?:I|me|the user)\b)",
    re.I,
)
_EVENT_MOVED = re.compile(
    rf"\b(?:moved|pushed|rescheduled|shifted|brought forward|postponed)\s+(?:the|my|our|a|an|this|next|his|her|their)\s+"
    rf"(?:[\w-]+\s+){{0,2}}?(?:{EVENTS})s?\b",
    re.I,
)
_EVENT_SUBJECT = re.compile(
    rf"^\W*(?:the|my|our|a|an)\s+(?:[\w-]+\s+){{0,2}}?(?:{EVENTS})s?\s+(?:was|is|has|got)\b", re.I
)
_LOOKALIKE_BASED = re.compile(r"\b\w+-based\b", re.I)
_BASED_IN = re.compile(r"(?<![-\w])based\s+(?:in|out of|near)\b", re.I)
PLACE_SLOTS = frozenset({"home_city", "home", "location", "city", "home_country", "country", "workplace"})


def not_own_change(text: str, slot: str | None) -> str | None:
    """Why `text` is no change of the user's own value of `slot` (None when it may be): it is
    another person's, an event's that moved, or the slot's word only in look."""
    if _SOMEONE_ELSE.search(text):
        return "someone else's, not the user's"
    if slot in PLACE_SLOTS or slot is None:
        if _EVENT_MOVED.search(text) or _EVENT_SUBJECT.search(text):
            return "an event that moved, not a move of the user's"
        if _LOOKALIKE_BASED.search(text) and not _BASED_IN.search(text):
            return "a word that only looks like the slot"
    if slot is not None and (value := _VALUES.get(slot)) is not None and not value.search(text):
        return f"no value of {slot}'s kind"
    return None


_DAYS = "|".join([*WEEKDAYS, *(m.lower() for m in MONTHS), "today", "tomorrow", "tonight", "noon", "midnight"])
# What a value of a slot looks like: a place after "in / to / out of / near" for where one lives (a
# name, not a weekday, a month or a time), a device for one's phone, an organisation for a job.
_VALUES = {
    "home_city": re.compile(
        rf"\b(?:in|to|out of|near|from)\s+(?!(?:{_DAYS}|the|a|an|my|our|his|her|their|its|it|this|that|\d)\b)[^\W\d_][\w'-]+"
        r"|\b(?:in|to|out of|near|from)\s+the\s+(?-i:[A-Z])"  # the Netherlands, the UK, the Bay Area
        r"|\b(?:in|to|by|near|at)\s+(?:a|an|the)\s+(?:new\s+)?(?:city|town|village|suburb|countryside|place|flat|"
        r"apartment|house|sea|seaside|coast|beach|lake|mountains?|island|country|capital)\b",
        re.I,
    ),
    "phone": re.compile(
        r"\b(?:iphone|pixel|galaxy|android|oneplus|fairphone|xiaomi|motorola|nokia|huawei|phone)\b", re.I
    ),
    "employer": re.compile(
        rf"\b(?:at|for|with|joined|by)\s+(?!(?:{_DAYS}|home|night|nights|work|weekends?|the weekend|it|this|that|"
        r"least|most|last|first|once|now|all|\d)\b)(?:(?:a|an|the)\s+)?[^\W\d_]"
        r"|\b(?:freelanc\w*|self-employed|unemployed|retired)\b",
        re.I,
    ),
}
