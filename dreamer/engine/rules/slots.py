"""The rules extractor's patterns, grouped by the slot they fill: first-person statements only
("I moved to Lisbon", "I switched from Evernote to Obsidian", "my Pixel 6 keeps dropping wifi"),
each written as one sentence about the user, and none in a question, a supposition or someone
else's news (`rules_words.blocked_spans`). Precision first: what would be a guess is either
said no further than it was ("here in Lisbon": the user is in Lisbon, not lives there) or left
to the model ("Globex starts Monday"), which is what hears more. Within the
table, earlier rules win where two match the same words, so a change is read before what is
owned and a job before a switch."""

from __future__ import annotations

from dreamer.core.topics import CARS, EDITORS, EMAIL_CLIENTS, NOTE_APPS, PHONES
from dreamer.engine.extraction.extract import Kind
from dreamer.engine.rules.words import (
    ADV,
    DATE,
    END,
    I_AM,
    I_HAVE,
    NOT_PLACE,
    ORG,
    PARTNERS,
    PEND,
    PLACE,
    VALUE,
    TalkRule,
    clean_value,
    event,
    has_started,
    married,
    move_without_destination,
    no_longer_said,
    now_a,
    owns,
    partner,
    say,
    talk_matches,
    talk_rule,
    task_in,
    these_days,
)

_OFTEN = (
    r"(?:once|twice|(?:three|four|five|six|\d) times) (?:a|per|every) (?:day|week|month)"
    r"|every (?:day|morning|evening|night|week|weekend|(?:mon|tues|wednes|thurs|fri|satur|sun)day)"
    r"|on (?:weekdays|weekends|(?:mon|tues|wednes|thurs|fri|satur|sun)days)|daily|weekly"
)
_USE_VERBS = r"(?P<verb>use|run|eat|drink|write|code in|work in|play|listen to|read|take|drive|ride)"
# A product by name: capitalised ("Outlook", "Apple Notes"), or one known by its lowercase name.
_NOT_A_NAME = r"(?!(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|weekends?\b|english\b)"
_NAME = (
    rf"(?:{NOT_PLACE}{_NOT_A_NAME}(?-i:[A-Z][\w.+'’-]*(?: [A-Z0-9][\w.+'’-]*){{0,2}})"
    rf"|(?:{EMAIL_CLIENTS}|{NOTE_APPS}|{EDITORS})){PEND}"
)
_TASK_VERBS = r"read|check|do|write|take|keep|send|manage|track"
_TASKS = r"e-?mails?|mail|notes|to-?dos?|tasks|journal|calendar|budget|finances|passwords|documents|docs"
# Apps whose name is no ordinary word, so "my <app>" said of a fault or a setting names the app used.
_APP = (
    r"vs ?code|visual studio code|neovim|nvim|vim|emacs|sublime(?: text)?|intellij|pycharm|webstorm|xcode|"
    r"notion|obsidian|evernote|onenote|logseq|joplin|thunderbird|gmail|fastmail|proton ?mail"
)
_APP_TALK = (
    r"keeps|won't|doesn't|isn't|is|just|crashes|crashed|froze|freezes|hangs|stopped|broke|lags|config|setup|"
    r"settings|extensions?|plugins?|vault|workspace|inbox|theme"
)
_CAR = rf"(?:(?:19|20)\d\d )?(?:{CARS})(?-i: [A-Z0-9][\w-]*){{0,2}}"
# Where a clause opens: the start, after punctuation, or after "I" and a filler word.
_CLAUSE = r"(?:^|(?<=[.,;:!?(])\s*|(?<=\n))(?:(?:ok|so|also|and|oh|but|well|finally|just|btw|honestly),? )*"
_OPENS = r"(?:^|(?<=[.,;:!?(-])|(?<=[.,;:!?(-] )|(?<=\bmy )|(?<=\bour )|(?<=\bok )|(?<=\bso )|(?<=\band ))"
_SWAP_VERB = r"(?:ditched|dumped|dropped|swapped|traded|replaced|exchanged)"
_NOT_A_PERSON = r"(?!(?:i|me|he|she|they|we|you|it|this|that|who|and|or|so|my|our|his|her|their)\b)"
_DIETS = r"vegetarian|vegan|pescatarian|gluten-free|lactose intolerant|dairy-free"
_ASIDE = r"btw|fyi|by the way|now|these days|nowadays|if that matters|if it matters"

SLOTS: dict[str, list[TalkRule]] = {
    # The team the user is on.
    "team": [
        talk_rule(
            "profile",
            rf"{I_HAVE}{ADV}(?:moved|transferred|switched) to the (?P<v>[\w -]{{2,40}}?) team\b",
            say("The user is on the {v} team."),
        ),
        talk_rule(
            "profile",
            rf"{I_AM}(?:now )?(?:on|in|part of) the (?P<v>[\w -]{{2,40}}?) team\b",
            say("The user is on the {v} team."),
        ),
    ],
    # Where the user lives: a move said with its place (a move said without it is `move_without_destination`).
    "home": [
        talk_rule(
            "profile",
            rf"\b(?:I|we)(?:'ve| have)? {ADV}(?:moved|relocated)(?: back)? to (?P<v>{PLACE}){PEND}",
            say("The user lives in {v}."),
        ),
        talk_rule(
            "profile", rf"{I_AM}{ADV}(?:moving|relocating) to (?P<v>{PLACE}){PEND}", say("The user is moving to {v}.")
        ),
        talk_rule(
            "profile",
            rf"{I_AM}(?:now )?(?:based|living|settled) in (?P<v>{PLACE}){PEND}",
            say("The user lives in {v}."),
        ),
        talk_rule(
            "profile",
            rf"\b(?:part|parts|perks?|joys?) of living in (?P<v>{PLACE}){PEND}",
            say("The user lives in {v}."),
        ),
    ],
    # Where the user is, said in passing: not where they live (a trip says the same), so it fills
    # no slot and retires nothing without a judge.
    "whereabouts": [
        talk_rule(
            "profile",
            rf"\b(?<!visiting )(?<!trip )here in (?P<v>{PLACE}){PEND}(?! for (?:a|the|two|three|\d+) )",
            say("The user is in {v}."),
        ),
        talk_rule(
            "profile",
            rf"{_OPENS}\s*(?:(?:survived|done with|finished|loving|enjoying) )?(?:my |our |the )?(?:first|1st) "
            rf"(?:week|month|weekend|night|day)s? (?:living |back )?in (?P<v>{PLACE}){PEND}(?! (?:of|at|on|with)\b)",
            say("The user is in {v}."),
        ),
    ],
    # Where and as what the user works: a job taken, joined, started or left.
    "work": [
        talk_rule(
            "profile",
            rf"\bI {ADV}(?:accepted|took|got|signed) (?:an?|the|their) (?:job )?(?:offer|job|position|role) "
            rf"(?:at|from|with) (?P<v>{ORG})",
            say("The user accepted a job at {v}."),
        ),
        talk_rule(
            "profile",
            rf"\bmy new (?:job|role|position) (?:at|with) (?P<v>{ORG})",
            say("The user has a new job at {v}."),
        ),
        talk_rule(
            "profile",
            rf"{I_HAVE}{ADV}(?:started|begun|began) (?:a new job|working|to work) (?:at|for|with) (?P<v>{ORG})",
            say("The user works at {v}."),
        ),
        talk_rule("profile", rf"{I_HAVE}{ADV}joined (?P<v>{ORG})", say("The user joined {v}.")),
        talk_rule(
            "profile",
            rf"\bI(?:'ve| have)? (?:just )?(?:got|been) promoted to (?P<v>{VALUE}){END}",
            say("The user was promoted to {v}."),
        ),
        talk_rule(
            "profile",
            rf"\b(?:I )?(?:just )?(?:handed in|gave|put in|turned in|handing in) (?:my )?notice(?: at (?P<v>{ORG}))?",
            lambda m: f"The user handed in their notice{' at ' + clean_value(m.group('v')) if m.group('v') else ''}.",
        ),
        talk_rule(
            "profile",
            r"\bI(?:'ve| have)? (?:just |finally |officially )?started at (?P<v>(?-i:[A-Z][\w&'.-]*(?: [A-Z][\w&'.-]*){0,2}))"
            rf"{PEND}",
            say("The user works at {v}."),
        ),
        talk_rule(
            "profile",
            rf"{_CLAUSE}(?:(?:my|the) )?(?:first|1st) (?:day|week|month|shift|year) as an? (?P<v>[a-z][\w -]{{1,40}}?)"
            r"(?: (?:done|over|complete|finished|in the books)\b|(?=[,.;:!]|$))",
            now_a,
        ),
        talk_rule(
            "profile",
            r"\bI (?:just |have just |'ve just )?started as an? (?P<v>[a-z][\w -]{1,40}?)(?= at\b|[,.;:!]|$)",
            now_a,
        ),
    ],
    # A switch of anything the user uses, said with what it was or what it is now.
    "changes": [
        talk_rule(
            "preference",
            rf"{I_HAVE}{ADV}(?:switched|moved|migrated|changed|gone) (?:over )?from (?P<a>{VALUE}) "
            rf"to (?P<b>{VALUE}){END}",
            say("The user switched from {a} to {b}."),
        ),
        talk_rule(
            "preference",
            rf"{I_HAVE}{ADV}(?:switched|migrated|moved over|changed over) to (?P<v>{VALUE}){END}",
            say("The user switched to {v}."),
        ),
        talk_rule(
            "preference",
            rf"\b(?:I|we)(?:'ve| have)? {ADV}(?:went|gone|going|decided to go|settled) (?:with|on) "
            rf"(?P<v>{VALUE}){END}",
            say("The user went with {v}."),
        ),
        talk_rule(
            "preference",
            rf"(?:{_CLAUSE}|\bI (?:(?:just|finally|also) )?){_SWAP_VERB} (?:my |the |our )?(?P<a>{VALUE}) for "
            rf"(?:an? )?(?P<b>{VALUE}){END}",
            say("The user switched to {b}."),
        ),
        talk_rule(
            "preference",
            rf"(?:{_CLAUSE}|\bI (?:(?:just|finally|also) )?)moved (?:everything|all (?:of )?my [\w ]{{2,20}}?) "
            rf"(?:out of|from|off) (?P<a>{VALUE}) (?:into|to|onto) (?P<b>{VALUE}){END}",
            say("The user switched to {b}."),
        ),
        talk_rule("preference", rf"\bI no longer (?P<v>{VALUE}){END}", no_longer_said),
        talk_rule(
            "preference",
            rf"\bI(?P<have>'ve| have)? (?P<how>started|stopped|quit|given up|gave up) (?P<v>{VALUE}){END}",
            has_started,
        ),
    ],
    # The app, tool or thing the user uses, and what for.
    "uses": [
        talk_rule(
            "preference",
            rf"\b(?:these days|nowadays),? I (?:mostly |mainly |only )?{_USE_VERBS} (?P<v>{VALUE}){END}",
            these_days,
        ),
        talk_rule(
            "preference",
            rf"\bI (?:mostly |mainly |only )?{_USE_VERBS} (?P<v>{VALUE}) (?:these days|nowadays){END}",
            these_days,
        ),
        talk_rule("preference", rf"\bI now {_USE_VERBS} (?P<v>{VALUE}){END}", these_days),
        talk_rule(
            "preference",
            rf"\bI (?:mostly |mainly |only |always )?use (?!it\b|this\b|that\b|them\b)(?P<v>{VALUE}){END}",
            say("The user uses {v}."),
        ),
        talk_rule(
            "preference",
            rf"\bI keep (?:all )?my (?P<a>[\w -]{{2,30}}?) in (?P<v>{VALUE}){END}",
            say("The user keeps their {a} in {v}."),
        ),
        talk_rule(
            "preference",
            rf"\bI (?:mostly |mainly |only |usually |always )?(?P<verb>{_TASK_VERBS}) (?:all )?(?:of )?(?P<my>my |our )?"
            rf"(?P<a>{_TASKS}) (?:in|on|with|through|using|via) (?P<v>{_NAME})",
            task_in,
        ),
        talk_rule(
            "preference",
            rf"\bI (?:mostly |mainly |only |usually )?(?:code|program|write code|write my code) in (?P<v>{_NAME})",
            say("The user codes in {v}."),
        ),
        talk_rule(
            "preference",
            rf"\bmy (?:new |old |current )?(?P<v>{_APP}){PEND}(?= (?:{_APP_TALK})\b)",
            say("The user uses {v}."),
        ),
    ],
    # What the user eats or does not, and how often they go somewhere.
    "diet_habits": [
        talk_rule(
            "preference", rf"\bI (?:don't|do not|never) eat (?P<v>{VALUE}){END}", say("The user doesn't eat {v}.")
        ),
        talk_rule(
            "profile",
            rf"{_OPENS}\s*(?:(?:also|oh|and|fyi|btw|ps),? )*(?:I'm |I am )?(?:(?:fully|strictly|now|mostly) )?"
            rf"(?P<v>{_DIETS})(?: now| these days)?,? (?:{_ASIDE}){PEND}",
            say("The user is {v}."),
        ),
        talk_rule(
            "preference",
            rf"\bI (?:usually |still |now )?go to (?P<v>(?:the |my )?[\w -]{{2,30}}?) (?P<f>{_OFTEN}){PEND}",
            say("The user goes to {v} {f}."),
        ),
        talk_rule(
            "preference",
            rf"\bI (?:don't|do not) (?P<v>(?:drink|eat|use|play|smoke|run|watch|do) {VALUE}) (?:anymore|any more){END}",
            no_longer_said,
        ),
    ],
    # What the user is learning, doing or signed up for.
    "pursuits": [
        talk_rule(
            "focus",
            rf"{I_AM}(?:now )?(?P<v>(?:doing|playing|learning|studying) {VALUE}) (?:now|these days|nowadays){END}",
            say("The user is {v} now."),
        ),
        talk_rule("focus", rf"{I_AM}(?:now )?taking (?P<v>(?:an?|the) {VALUE}){END}", say("The user is taking {v}.")),
        talk_rule(
            "focus",
            rf"{I_HAVE}{ADV}(?:signed up|registered|enrolled) (?:for|in) (?P<v>{VALUE}){END}",
            say("The user signed up for {v}."),
        ),
    ],
    # The user's dates: what is due, moved, launched or on a day.
    "dates": [
        talk_rule(
            "focus",
            rf"\b(?:my|our|the) (?P<t>[\w -]{{2,40}}?) (?:is|are) (?:now )?due (?:on |by )?(?P<d>{DATE})",
            say("The user's {t} is due on {d}."),
        ),
        talk_rule(
            "focus",
            rf"\b(?:my|our|the) (?P<t>[\w -]{{2,40}}?) (?:got |has been |have been |was |were |is |has )?"
            rf"(?:moved|pushed(?: back)?|postponed|delayed|slipped|rescheduled|brought forward|changed) (?:back )?"
            rf"to (?P<d>{DATE})",
            say("The user's {t} is now on {d}."),
        ),
        talk_rule(
            "focus",
            rf"\b(?:pushed|moved|extended|postponed|changed) (?:my|our|the) (?P<t>(?:[\w-]+ )?(?:deadline|due date))"
            rf"(?: back| out)?(?: to | until | till |, it's |, it is |, now )(?:on )?(?P<d>{DATE})",
            say("The user's {t} is now on {d}."),
        ),
        talk_rule(
            "focus",
            rf"\b(?:I'm|I am|we're|we are) (?P<verb>launching|releasing|submitting|presenting) (?:my |our |the )?"
            rf"(?P<t>[\w -]{{2,30}}?) (?:on |by )(?P<d>{DATE})",
            event,
        ),
        talk_rule(
            "focus",
            rf"\b(?:my|our|the) (?P<t>[\w -]{{2,40}}?) (?:is|are) (?:now )?(?:on |for |set for |scheduled for )?(?P<d>{DATE})",
            say("The user's {t} is on {d}."),
        ),
        talk_rule(
            "focus",
            rf"{_CLAUSE}(?:the |my |our )?(?!(?:his|her|their|its|it|that|this|he|she)\b)(?P<t>[a-z]+(?: [a-z]+)?) is (?:now )?(?:on )?(?P<d>{DATE}) now\b",
            say("The user's {t} is now on {d}."),
        ),
        talk_rule(
            "focus",
            rf"\b(?:got|get|given|gave (?:me|us)) an extension(?: to| until| till|,| —| -|:)? (?P<d>{DATE})",
            say("The user got an extension: the deadline is now on {d}."),
        ),
        talk_rule(
            "focus",
            rf"(?:{_CLAUSE}|\bmy )(?P<t>draft|thesis|paper|essay|report|assignment|application|proposal) (?:is )?due "
            rf"(?:to (?:my|the) \w+ )?(?:on |by )?(?P<d>{DATE})",
            say("The user's {t} is due on {d}."),
        ),
        talk_rule(
            "focus",
            rf"\b(?:pushed|moved|extended|postponed) (?:my|our|the) (?P<t>draft|thesis|paper|essay|report|exam|launch"
            rf"|interview|presentation|review|release|surgery|wedding|race|trip)(?: back| out)? (?:to|until|till) "
            rf"(?:on )?(?P<d>{DATE})",
            say("The user's {t} is now on {d}."),
        ),
    ],
    # The phone, car and things the user owns, bought or sold.
    "owned": [
        talk_rule(
            "profile",
            rf"\bI (?:just )?sold (?P<a>{VALUE}) and (?:got|bought) (?P<b>(?:an?|the|my) {VALUE}){END}",
            say("The user sold {a} and got {b}."),
        ),
        talk_rule(
            "profile",
            rf"\bI (?:just )?(?P<verb>sold|bought|got a new) (?P<v>{VALUE}){END}",
            say("The user {verb} {v}."),
        ),
        talk_rule("profile", rf"\bmy (?:new |old |current )?(?P<v>(?:{PHONES})){PEND}", owns("phone")),
        talk_rule("profile", rf"\bmy (?:new |old |current )?(?P<v>{_CAR}){PEND}", owns("car")),
        talk_rule("profile", rf"\bI (?:now )?drive (?P<v>(?:an?|the) {VALUE}){END}", say("The user drives {v}.")),
    ],
    # The user's partner.
    "people": [
        talk_rule(
            "profile",
            rf"\b{_NOT_A_PERSON}(?P<n>[a-z]+) \(my (?P<r>{'|'.join(PARTNERS)})\)",
            partner,
        ),
        talk_rule(
            "profile",
            rf"{_CLAUSE}{_NOT_A_PERSON}(?P<n>[a-z]+) and I (?:finally |just |officially )?got (?P<w>married|engaged)\b",
            married,
        ),
    ],
}
SLOT_RULES: list[TalkRule] = [rule for rules in SLOTS.values() for rule in rules]


def slot_matches(text: str, blocked: list[tuple[int, int]]) -> list[tuple[Kind, str, int, int]]:
    """(kind, sentence about the user, start, end) for each statement of the table outside the
    blocked clauses, and a move said without its place."""
    found = talk_matches(text, blocked, SLOT_RULES)
    moved = move_without_destination(text, blocked)
    if moved is not None and not any(t == moved[0] for _, t, _, _ in found):
        found.append(("profile", moved[0], moved[1], moved[1] + 1))
    return found
