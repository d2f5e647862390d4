"""Rules for what the user uses and owns, said in passing: the app a task is done in ("I read
email in Outlook", "I take notes in Notion"), the editor code is written in, a phone or a car
called theirs ("my Pixel 6 keeps dropping wifi", "my 2012 Honda Civic is making a noise",
"I drive a Golf") and an app called theirs ("my vs code keeps freezing"). Each is written as
one sentence about the user; the slot it fills is named by `dreamer.core.topics`."""

from __future__ import annotations

import re

from dreamer.core.topics import CARS, EDITORS, EMAIL_CLIENTS, NOTE_APPS, PHONES
from dreamer.engine.rules_talk import (
    END,
    NOT_PLACE,
    PEND,
    VALUE,
    Render,
    TalkRule,
    clean_value,
    conjugate,
    say,
    talk_rule,
)

# A product by name: capitalised ("Outlook", "Apple Notes"), or one known by its lowercase name.
_NOT_A_NAME = r"(?!(?:mon|tues|wednes|thurs|fri|satur|sun)days?\b|weekends?\b|english\b)"
_NAME = (
    rf"(?:{NOT_PLACE}{_NOT_A_NAME}(?-i:[A-Z][\w.+'’-]*(?: [A-Z0-9][\w.+'’-]*){{0,2}})"
    rf"|(?:{EMAIL_CLIENTS}|{NOTE_APPS}|{EDITORS})){PEND}"
)
_TASK_VERBS = r"read|check|do|write|take|keep|send|manage|track"
_TASKS = r"e-?mails?|mail|notes|to-?dos?|tasks|journal|calendar|budget|finances|passwords|documents|docs"
_YEAR = r"(?:(?:19|20)\d\d )?"
# Apps whose name is no ordinary word, so "my <app>" said of a fault or a setting names the app used.
_APP = (
    r"vs ?code|visual studio code|neovim|nvim|vim|emacs|sublime(?: text)?|intellij|pycharm|webstorm|xcode|"
    r"notion|obsidian|evernote|onenote|logseq|joplin|thunderbird|gmail|fastmail|proton ?mail"
)
_APP_TALK = (
    r"keeps|won't|doesn't|isn't|is|just|crashes|crashed|froze|freezes|hangs|stopped|broke|lags|config|setup|"
    r"settings|extensions?|plugins?|vault|workspace|inbox|theme"
)
_CAR = rf"{_YEAR}(?:{CARS})(?-i: [A-Z0-9][\w-]*){{0,2}}"


def _a(noun: str) -> str:
    """The noun with its indefinite article ("an iPhone 15", "a Pixel 6")."""
    vowel = noun[:1].lower() in "aeiou" and not noun.lower().startswith(("one", "use", "uni"))
    return f"{'an' if vowel else 'a'} {noun}"


def _task(m: re.Match[str]) -> str:
    their = "their " if m.group("my") else ""
    return (
        f"The user {conjugate(m.group('verb').lower())} {their}{m.group('a').lower()} in {clean_value(m.group('v'))}."
    )


def _owns(thing: str) -> Render:
    return lambda m: f"The user's {thing} is {_a(clean_value(m.group('v')))}."


OWN_RULES: list[TalkRule] = [
    talk_rule(
        "preference",
        rf"\bI (?:mostly |mainly |only |usually |always )?(?P<verb>{_TASK_VERBS}) (?:all )?(?:of )?(?P<my>my |our )?"
        rf"(?P<a>{_TASKS}) (?:in|on|with|through|using|via) (?P<v>{_NAME})",
        _task,
    ),
    talk_rule(
        "preference",
        rf"\bI (?:mostly |mainly |only |usually )?(?:code|program|write code|write my code) in (?P<v>{_NAME})",
        say("The user codes in {v}."),
    ),
    talk_rule("profile", rf"\bmy (?:new |old |current )?(?P<v>(?:{PHONES})){PEND}", _owns("phone")),
    talk_rule("profile", rf"\bmy (?:new |old |current )?(?P<v>{_CAR}){PEND}", _owns("car")),
    talk_rule(
        "preference",
        rf"\bmy (?:new |old |current )?(?P<v>{_APP}){PEND}(?= (?:{_APP_TALK})\b)",
        say("The user uses {v}."),
    ),
    talk_rule("profile", rf"\bI (?:now )?drive (?P<v>(?:an?|the) {VALUE}){END}", say("The user drives {v}.")),
]
