"""No supersession on a guess: without a judge, a slot's newer value retires the older one only
when it is a change of the user's own value."""

from __future__ import annotations

import pytest

from dreamer.core.consolidate import Neighbour, Thresholds, content_hash, decide
from dreamer.core.own_change import not_own_change, whose_change
from dreamer.core.topics import Topic

OTHERS = "someone else's, not the user's"
EVENT = "an event that moved, not a move of the user's"
LOOKALIKE = "a word that only looks like the slot"


@pytest.mark.parametrize(
    "text,slot,why",
    [
        ("my dad finally switched to an iPhone", "phone", OTHERS),
        ("The user's dad finally switched to an iPhone.", "phone", OTHERS),
        ("My flatmate has gone fully vegan.", "diet", OTHERS),
        ("The user's sister moved to Berlin.", "home_city", OTHERS),
        ("Her boss switched to a Mac.", "laptop", OTHERS),
        ("The user's two best friends moved to Leeds.", "home_city", OTHERS),
        ("The school moved the staff meeting to Thursday.", "home_city", EVENT),
        ("The user moved the dentist appointment to Friday.", "home_city", EVENT),
        ("The standup was moved to 10am.", "home_city", EVENT),
        ("The user loves turn-based strategy games.", "home_city", LOOKALIKE),
        ("The user is into plant-based cooking.", "home_city", LOOKALIKE),
        ("The user moved back home.", "home_city", "no value of home_city's kind"),
        ("The user moved it to Friday.", "home_city", "no value of home_city's kind"),
        ("The user moved to 9am starts.", "home_city", "no value of home_city's kind"),
        ("The user is working on the backhand.", "employer", "no value of employer's kind"),
        ("The user works at night.", "employer", "no value of employer's kind"),
        ("The user switched to dark mode.", "phone", "no value of phone's kind"),
    ],
)
def test_a_change_that_is_not_the_users_own_is_named(text, slot, why):
    assert not_own_change(text, slot) == why


@pytest.mark.parametrize(
    "text,slot",
    [
        ("The user moved to Lisbon.", "home_city"),
        ("The user moved to Lisbon with her partner.", "home_city"),
        ("My partner and I moved to Porto.", "home_city"),
        ("The user switched to a Pixel 8.", "phone"),
        ("The user is vegan now.", "diet"),
        ("The user is based in Berlin.", "home_city"),
        ("The user's team grew to 11.", "team_size"),
        ("The user's dad's old phone is now the user's phone.", "phone"),
        ("the user moved to paris", "home_city"),
        ("The user moved to the countryside.", "home_city"),
        ("The user relocated to São Paulo.", "home_city"),
        ("The user now works at Plaid.", "employer"),
        ("The user joined a fintech startup.", "employer"),
        ("The user went freelance.", "employer"),
        ("The user moved to the Netherlands.", "home_city"),
        ("The user relocated to the Bay Area.", "home_city"),
        ("The user now works at google.", "employer"),
        ("The user got a new job at the bank.", "employer"),
    ],
)
def test_the_users_own_change_is_one(text, slot):
    assert not_own_change(text, slot) is None


def stored(text: str, topic: str, similarity: float = 0.6) -> Neighbour:
    return Neighbour("m1", text, "profile", content_hash(text), similarity, topic=topic)


def test_without_a_judge_another_persons_change_keeps_the_users_value():
    old = stored("The user uses a Pixel 7.", "phone")
    decision = decide(
        "The user's dad finally switched to an iPhone.", "profile", [old], Thresholds(), topic=Topic("phone", "one")
    )
    assert (decision.action, decision.reason) == ("add", f"kept beside phone: {OTHERS} (no judgement)")


def test_without_a_judge_the_users_own_change_still_supersedes():
    old = stored("The user uses a Pixel 7.", "phone")
    decision = decide("The user switched to an iPhone 15.", "profile", [old], Thresholds(), topic=Topic("phone", "one"))
    assert (decision.action, decision.target) == ("supersede", "m1")


def test_with_a_judge_the_pair_is_judged_and_its_fallback_keeps_both():
    old = stored("The user lives in Leeds.", "home_city")
    decision = decide(
        "The school moved the staff meeting to Thursday.",
        "profile",
        [old],
        Thresholds(),
        topic=Topic("home_city", "one"),
        can_judge=True,
    )
    assert decision.action == "judge"
    assert decision.fallback is not None and decision.fallback.action == "add"


# --------------------------------------------------------------------------- whose change it is

SOMEONE = "someone else's, not the user's"
HYPO = "a hypothetical, not a change"
ASKED = "a question, not a change"
OFF = "a plan called off, not a change"
NOT_YET = "a negated future, not a change"


@pytest.mark.parametrize(
    "text,why",
    [
        ("Luca moved to Milan last spring.", SOMEONE),
        ("Brother Karim switched to a Pixel.", SOMEONE),
        ("Colleague Priya went vegan.", SOMEONE),
        ("My flatmate went vegan.", SOMEONE),
        ("the user's cousin relocated to Perth", SOMEONE),
        ("She quit her job at the bank.", SOMEONE),
        ("Marta Silva joined Stripe.", SOMEONE),
        ("Neighbour Tom bought a Tesla.", SOMEONE),
        ("If I moved to Tokyo I would learn Japanese.", HYPO),
        ("I might move to Lisbon next year.", HYPO),
        ("Thinking about switching to a Pixel.", HYPO),
        ("I'd love to live by the sea someday.", HYPO),
        ("Should I move to Berlin?", ASKED),
        ("Is it worth switching to Neovim", ASKED),
        ("Not moving to Bristol after all.", OFF),
        ("We decided against the move to Leeds.", OFF),
        ("The job offer in Austin fell through.", OFF),
        ("I won't be switching to Linux.", NOT_YET),
        ("The user is not going to take the Denver job.", NOT_YET),
        # German
        ("Mein Bruder ist nach Hamburg gezogen.", SOMEONE),
        ("Wenn ich nach Wien ziehen würde, ...", HYPO),
        ("Ich ziehe doch nicht nach Köln.", OFF),
        ("Ich werde nicht nach München ziehen.", NOT_YET),
        # French
        ("Mon frère a déménagé à Lyon.", SOMEONE),
        ("Si je déménageais à Montréal, je prendrais un chien.", HYPO),
        ("Finalement je ne déménage pas à Nantes.", OFF),
        # Spanish
        ("Mi hermana se mudó a Sevilla.", SOMEONE),
        ("Si me mudara a Bogotá, aprendería salsa.", HYPO),
        ("¿Debería mudarme a Madrid?", ASKED),
        ("Al final no me mudo a Valencia.", OFF),
        ("No voy a cambiarme de trabajo.", NOT_YET),
    ],
)
def test_a_statement_that_is_not_the_users_change_says_why(text, why):
    assert whose_change(text) == why


@pytest.mark.parametrize(
    "text,name",
    [
        ("I moved to Milan last spring.", None),
        ("Moved to Lisbon in May.", None),
        ("Team grew to 11 people.", None),
        ("The user switched to a Pixel 8.", None),
        ("My partner and I moved to Porto.", None),
        ("Luca and I moved to Milan.", None),
        ("Anna moved to Milan.", "Anna"),
        ("Has a new job at Plaid.", None),
        ("Went vegan in January.", None),
        ("My team is now 12 people.", None),
        ("Ich bin nach Hamburg gezogen.", None),
        ("J'ai déménagé à Lyon.", None),
        ("Me mudé a Sevilla.", None),
        ("When I moved to Leeds I took up running.", None),
    ],
)
def test_the_users_own_statement_is_theirs(text, name):
    assert whose_change(text, name) is None


def test_the_users_name_is_the_user_but_their_relatives_are_not():
    assert whose_change("Anna's sister moved to Oslo.", "Anna") == SOMEONE
    assert whose_change("Anna moved to Oslo.", "Anna") is None
    assert whose_change("Anna moved to Oslo.") == SOMEONE
