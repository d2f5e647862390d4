"""Whether a statement that fills a single-valued slot changes the user's own value, read without
a model. Without a judge nothing is retired, but a slot's newer value is proposed as a change of
the user's for a person to settle; these are the shapes in which it is none:

* `whose_change`: the statement's subject is not the user. It is the user's own only when its
  subject is the user (first person, "the user", the user's name, or no subject at all, as a
  terse fact is written: "Moved to Lisbon."); another named or described person ("Luca moved to
  Milan", "Brother Karim ...", "my flatmate went vegan"), a hypothetical or a conditional ("If I
  moved to Tokyo"), a question, a plan called off ("Not moving to Bristol after all") or a
  negated future ("I won't be switching") is not. English, German, French and Spanish.
* an event that moved ("the school moved the staff meeting to Thursday" is not a move of home);
* a word that only looks like the slot ("turn-based" is not "based in").

Pure: text in, the reason it is no change of the user's out.
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
SOMEONE_ELSE = "someone else's, not the user's"
HYPOTHETICAL = "a hypothetical, not a change"
QUESTION = "a question, not a change"
CALLED_OFF = "a plan called off, not a change"
NOT_GOING_TO = "a negated future, not a change"

# A role said before a name, without "my": "Brother Karim moved ...", "Colleague Priya is ...".
_ROLE_NAMED = re.compile(rf"^\W*(?:{OTHERS}|mate|pal|buddy|coworker|bestie)\s+(?-i:[A-Z][\w'-]+)", re.I)
_NAME_S_KIN = re.compile(rf"^\W*(?-i:[A-Z][\w-]+)'s\s+(?:[\w-]+\s+){{0,2}}?(?:{OTHERS})\b", re.I)
# Another person in the other languages read: "mein Bruder", "ma sœur", "mi hermana".
_KIN_ABROAD = re.compile(
    r"^\W*(?:mein|meine|meinem|meiner|unser|unsere|mon|ma|mes|notre|nos|mi|mis|nuestro|nuestra)\s+"
    r"(?:[\w-]+\s+)?(?:bruder|schwester|vater|mutter|mann|frau|freund|freundin|kollege|kollegin|mitbewohner(?:in)?|"
    r"chef|chefin|sohn|tochter|eltern|nachbar(?:in)?|frère|s(?:œ|oe)ur|père|mère|mari|femme|ami|amie|copain|"
    r"copine|collègue|coloc(?:ataire)?|patron|fils|fille|parents|voisin|voisine|hermano|hermana|padre|madre|"
    r"marido|esposa|esposo|amigo|amiga|compañer[oa]|jef[ea]|hij[oa]|padres|novi[oa]|vecin[oa])\b",
    re.I,
)
_PRONOUN = re.compile(r"^\W*(?:he|she|they|his|her|their)\b(?!\s+and\s+I\b)", re.I)
_WITH_ME = re.compile(r"^\W*[\w'-]+(?:\s+[\w'-]+)?\s+(?:and|&)\s+(?:I|me|the user|myself)\b", re.I)
# What a terse fact starts with that is no person: "Team grew to 11", "Diet is vegan now".
_THINGS = frozenset(
    """team company startup firm employer job work role office family household home house flat apartment
    rent salary budget diet phone laptop car bike editor stack project app product plan goal commute gym
    routine schedule band club group class course degree thesis school university department org business
    shop store studio clinic lab hospital cloud database backend frontend website site blog newsletter
    podcast channel garden kitchen wedding trip move visa lease mortgage loan new now currently recently
    moved relocated switched started joined quit left lives living works working uses using prefers likes
    loves hates vegan vegetarian based allergic married engaged divorced retired freelance self wants needs
    has had got getting went going is was are were also still no not never favourite favorite main daily
    weekly monthly yearly every each most some all both one two three first last next this that these those
    there here user users""".split()
)
# A bare capitalised subject followed by what a person does: "Luca moved to Milan", "Priya is vegan".
_NAMED_SUBJECT = re.compile(
    r"^\W*(?P<name>(?-i:[A-Z][a-z\u00c0-\u024f'-]+))(?:\s+(?-i:[A-Z][a-z\u00c0-\u024f'-]+))?(?:'s)?\s+(?:just\s+|finally\s+|"
    r"recently\s+|now\s+|also\s+)?"
    r"(?:moved|moves|relocated|switched|went|started|quit|left|joined|got|became|bought|sold|lives|works|"
    r"uses|took|changed|dropped|stopped|married|adopted|turned|is (?:moving|switching|going|now|vegan|vegetarian)|"
    r"has (?:moved|switched|started|quit|left|joined|become|gone))\b",
    re.I,
)
_HYPOTHESIS = re.compile(
    r"^\W*(?:if|suppose|supposing|imagine|assuming|in case|unless|what if)\b"
    r"|\b(?:what if|if (?:I|we|the user)|in case (?:I|we)|I'?d (?:love|like|consider|probably|maybe)|"
    r"I would|we would|the user would|might (?:move|switch|go|start|quit|leave|join|take|become)|"
    r"(?:thinking|dreaming|fantasi[sz]ing) (?:about|of)|considering|toying with|someday|one day|"
    r"hypothetically|in theory|maybe (?:I|we|the user)|wonder(?:ing)? (?:if|whether))\b"
    r"|^\W*(?:wenn|falls|angenommen)\b|\b(?:wenn|falls) (?:ich|wir)\b|\bw(?:ü|ue)rde\b"
    r"|^\W*(?:si|imagin(?:ons|e|a|emos)|suppos(?:ons|ez|ons que))\b|\bsi (?:je|j'|on|nous|yo|me|nos)\b"
    r"|\b(?:j'aimerais|je voudrais|me gustar[íi]a|quisiera)\b",
    re.I,
)
_ASKS = re.compile(
    r"\?\s*$|^\W*¿|^\W*(?:should|shall|could|would|can|do|does|did|is|are|am|have|has|will)\s+"
    r"(?:I|we|you|he|she|they|it|the user|my|our)\b|^\W*(?:sollte|soll|kann) (?:ich|wir)\b"
    r"|^\W*(?:est-ce que|dois-je|devrais-je)\b|^\W*(?:debo|deber[íi]a|puedo)\b",
    re.I,
)
_CALLED_OFF = re.compile(
    r"\b(?:after all|called off|calling off|cancel+ed|cancel+ing|decided against|decided not to|"
    r"changed (?:my|our|their|his|her) minds?|fell through|scrapped|shelved|backed out|pulled out|"
    r"no longer (?:moving|going|switching|planning|taking|joining|starting|leaving)|"
    r"not (?:moving|switching|taking|joining|starting|leaving|quitting) (?:to|after|anymore|any more)|"
    r"put (?:it|the move|the plan) on hold|on ice)\b"
    r"|\bdoch nicht\b|\bfinalement (?:pas|non)\b|\bfinalement,? (?:je|on|nous) ne\b|\bal final no\b|"
    r"\bya no (?:me mudo|voy)\b",
    re.I,
)
_NEGATED_FUTURE = re.compile(
    r"\b(?:won'?t|will not|shan'?t|not going to|never going to|am not going to|is not going to|"
    r"isn'?t going to|aren'?t going to|don'?t plan to|doesn'?t plan to|have no plans? to|has no plans? to|"
    r"not planning (?:to|on)|will never|no plans? to)\b"
    r"|\bwerde (?:nicht|nie)\b|\bne (?:vais|va|vais jamais) pas\b|\bno (?:voy|vamos|va) a\b",
    re.I,
)
_FIRST_PERSON = re.compile(
    r"^\W*(?:I|I'm|I've|I'll|I'd|me|my|mine|we|we're|we've|our|the user|user|ich|mein|meine|wir|je|j'|"
    r"moi|mon|ma|mes|nous|yo|me|mi|mis|nosotros)\b",
    re.I,
)


def whose_change(text: str, user_name: str | None = None) -> str | None:
    """Why `text` is not a change of the user's own (None when it is): its subject is another
    named or described person, or it changes nothing yet (a hypothetical, a question, a plan
    called off, a negated future). `user_name`: the user's own name, a subject like "I"."""
    said = text.strip().replace("\u2019", "'")
    if _ASKS.search(said):
        return QUESTION
    if _HYPOTHESIS.search(said):
        return HYPOTHETICAL
    if _CALLED_OFF.search(said):
        return CALLED_OFF
    if _NEGATED_FUTURE.search(said):
        return NOT_GOING_TO
    if _WITH_ME.search(said) or _is_user(said, user_name):
        return None
    if any(p.search(said) for p in (_SOMEONE_ELSE, _ROLE_NAMED, _NAME_S_KIN, _KIN_ABROAD, _PRONOUN)):
        return SOMEONE_ELSE
    m = _NAMED_SUBJECT.search(said)
    if m is not None and m.group("name").casefold() not in _THINGS:
        return SOMEONE_ELSE
    return None


def _is_user(said: str, user_name: str | None) -> bool:
    """Whether the statement's subject is the user: the first person, "the user", their name."""
    if user_name and re.match(rf"^\W*{re.escape(user_name)}\b(?!'s\s+(?:{OTHERS})\b)", said, re.I):
        return True
    return bool(_FIRST_PERSON.search(said)) and not (_SOMEONE_ELSE.search(said) or _KIN_ABROAD.search(said))


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


def not_own_change(text: str, slot: str | None, user_name: str | None = None) -> str | None:
    """Why `text` is no change of the user's own value of `slot` (None when it may be): not the
    user's (`whose_change`), an event's that moved, or the slot's word only in look."""
    if why := whose_change(text, user_name):
        return why
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
