"""Chat said without the full sentence is heard: where one lives said in passing, a switch said
as ditching or swapping, a first month in a role, a partner named in brackets or married, a date
said as now, a habit dropped; questions, suppositions and other people's news give nothing."""

from __future__ import annotations

import pytest

from dreamer.core.topics import infer_topic
from dreamer.engine.rules.casual import read_casual
from dreamer.engine.rules.extractor import rule_matches, says_nothing

HEARD = [
    ("the trams are the best part of living in Vienna", [("profile", "The user lives in Vienna.")]),
    ("finally ditched chrome for firefox, way faster", [("preference", "The user switched to firefox.")]),
    ("I swapped my morning soda for sparkling water", [("preference", "The user switched to sparkling water.")]),
    ("so i moved all my recipes out of evernote into logseq", [("preference", "The user switched to Logseq.")]),
    ("first week as a paramedic done, wild", [("profile", "The user is now a paramedic.")]),
    ("i just started as a sous chef at a bistro downtown", [("profile", "The user is now a sous chef.")]),
    ("tom (my bf) hates hiking", [("profile", "The user's boyfriend is Tom.")]),
    ("so nadia and i got engaged on the beach!!", [("profile", "The user got engaged to Nadia.")]),
    ("visa office was slow, interview is oct 14 now", [("focus", "The user's interview is now on October 14.")]),
    (
        "prof gave me an extension, april 30 now",
        [("focus", "The user got an extension: the deadline is now on April 30.")],
    ),
    ("my report due to the board on june 2, yikes", [("focus", "The user's report is due on June 2.")]),
    ("the surgeon moved the surgery to march 9", [("focus", "The user's surgery is now on March 9.")]),
    ("i don't drink soda anymore, it wrecks my sleep", [("preference", "The user no longer drinks soda.")]),
    ("i'm just a junior accountant so cash is tight", [("profile", "The user is a junior accountant.")]),
    ("i live in porto, i can walk to the sea", [("profile", "The user lives in Porto.")]),
]

NOT_HEARD = [
    "is it cold here in oslo in march?",
    "my brother ditched his iphone for a pixel",
    "what if i swapped coffee for tea, would i sleep better?",
    "my cousin's first week as a nurse went fine",
    "my sister and her (my bff) got married",
    "should i move my notes out of notion into obsidian?",
    "would you ditch vim for emacs?",
    "her party is may 3 now",
    "he doesn't drink beer anymore",
    "haha nice, ty",
]


@pytest.mark.parametrize(("said", "expected"), HEARD)
def test_chat_is_heard(said: str, expected: list[tuple[str, str]]) -> None:
    assert rule_matches(said, "agent") == expected


@pytest.mark.parametrize("said", NOT_HEARD)
def test_what_is_not_ones_own_news_gives_nothing(said: str) -> None:
    assert rule_matches(said, "agent") == []


@pytest.mark.parametrize(
    ("statement", "key"),
    [
        ("The user's girlfriend is Rachel.", "partner"),
        ("The user married Tom.", "partner"),
        ("The user is now a sous chef.", "job_title"),
        ("The user is now a freelancer.", "job_title"),
        ("The user switched to Logseq.", "note_app"),
    ],
)
def test_chat_statements_fill_their_slot(statement: str, key: str) -> None:
    topic = infer_topic(statement, "profile")
    assert topic is not None and topic.key == key and topic.cardinality == "one"


def test_a_short_month_beside_its_day_is_written_out() -> None:
    assert read_casual("launch is sept 1, demo on mar 3rd") == "launch is September 1, demo on March 3rd"


def test_a_modal_is_not_conjugated() -> None:
    assert rule_matches("i'm a nurse, i can work nights", "agent") == [("profile", "The user is a nurse.")]


@pytest.mark.parametrize(
    "statement,empty",
    [
        ("The user loves it.", True),
        ("The user always has a banana w peanut butter, fav thing, is that enough for 10k.", True),
        ("The user wants a bigger flat?", True),
        ("The user loves it when the build is green.", False),
        ("The user loves hiking.", False),
        ("The user is vegetarian.", False),
        ("The user's favourite show is It's Always Sunny in Philadelphia.", False),
        ("The user is IT support at Acme.", False),
    ],
)
def test_a_statement_that_keeps_nothing_is_not_kept(statement, empty):
    assert says_nothing(statement) is empty
