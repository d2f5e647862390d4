"""Changes said without the old words reach the memory they change: an ending, another count of
the same thing, another value of one kind, a job elsewhere; and the look-alikes that do not."""

from __future__ import annotations

from datetime import date

import pytest

from dreamer.core.consolidate import Neighbour, Thresholds, decide, route
from dreamer.core.implied import change_sides, counts, implied_query, implied_reason, implied_slots, pair_grounds
from dreamer.engine.consolidation.judge import JudgePair, Statement, render_pairs

ROUTED = [
    ("Team grew to 11 people.", "Team of 8 engineers, all remote.", None, "another count of team"),
    ("Book club went from six to nine members.", "Book club has six members.", None, "another count of book"),
    ("The choir is now twelve singers.", "The choir has eight singers.", None, "another count of choir"),
    ("Runs 20-25 km a week now.", "Runs 10 km a week.", None, "another count of km"),
    ("Migrating to GCP from AWS.", "Hosts everything on AWS.", None, "another cloud"),
    ("Switched the backend from Django to FastAPI.", "The backend is written in Django.", None, "another framework"),
    (
        "The user is done with TAing this term.",
        "The user TAs the intro to statistics course.",
        None,
        "an ending of what it mentions",
    ),
    (
        "The user handed in their notice.",
        "The user works at Acme as a designer.",
        None,
        "an ending of what it mentions",
    ),
    (
        "The user is now a freelance translator.",
        "The user translates for an agency called Ordbro.",
        None,
        "an ending of what it mentions",
    ),
    ("The user is no longer doing keto.", "The user follows a keto diet.", None, "an ending of what it mentions"),
    (
        "The user quit the job at Halfmoon Books.",
        "The user works mornings at Halfmoon Books.",
        None,
        "an ending of what it mentions",
    ),
    ("The user's team grew to 11 engineers.", "The user's team has 8 engineers.", None, "another count of engineer"),
    ("Tallyhub's beta is at 10k users now.", "Tallyhub's beta has 2,000 users.", None, "another count of beta"),
    ("Tallyhub is fully migrating to GCP.", "Tallyhub runs its infrastructure on AWS.", None, "another cloud"),
    (
        "The team now builds new projects in Svelte.",
        "The team builds its projects in React.",
        None,
        "another framework",
    ),
    ("The service moved from MySQL to Postgres.", "The service stores orders in MongoDB.", None, "another database"),
    (
        "The user accepted a job in Amsterdam.",
        "The user lives in Lyon.",
        "home_city",
        "a job elsewhere reaches home_city",
    ),
    (
        "The user's thesis pivoted to heat stress.",
        "The user's thesis examines malaria.",
        None,
        "a change to its thesis",
    ),
    ("The user passed the driving test.", "The user's driving test is on 12 May.", None, "a completion of its driv"),
    (
        "The IRB amendment was approved.",
        "The IRB amendment is pending approval.",
        None,
        "a completion of its amendment",
    ),
    ("Tallyhub launched in early March.", "Tallyhub's launch deadline is March 1.", None, "a completion of its launch"),
]


@pytest.mark.parametrize(("new", "old", "topic", "reason"), ROUTED)
def test_a_change_said_without_the_old_words_reaches_it(new, old, topic, reason):
    assert implied_reason(new, old, topic) == reason


NOT_ROUTED = [
    ("The user runs 5k on Tuesdays.", "The user has 2 cats.", None),  # numbers of different things
    ("The user has 3 cats.", "The user has 3 cats and a dog.", None),  # the same count
    ("The user likes React.", "The user uses React at work.", None),  # the same framework
    ("The user left the party early.", "The user lives in Denver.", "home_city"),  # an ending of something else
    ("The user's sister lives in Berlin.", "The user lives in Lyon.", "home_city"),  # no job elsewhere
    ("The user enjoys Python and cooking.", "The user cooks Thai food on Sundays.", None),  # no change said
    ("Mel finished a painting with her kids.", "Mel enjoys painting landscapes.", None),  # one thing done
    ("Writing helps Jo express her feelings.", "Jo's advice is to react calmly.", None),  # words, not names
    ("Caroline is now ready to help others who need support.", "Caroline values the support of friends.", None),
    ("The user passed the driving test.", "The user enjoys driving in the hills.", None),  # nothing awaited
    ("John won the game.", "John scored 40 points in a game last week.", None),  # over, not awaited
]


@pytest.mark.parametrize(("new", "old", "topic"), NOT_ROUTED)
def test_a_statement_that_changes_nothing_stored_is_not_routed_by_implication(new, old, topic):
    assert implied_reason(new, old, topic) is None


def test_counts_read_thousands_and_their_short_forms_alike():
    assert counts("2,000 users, then 10k, then 1.5 million") == {2000.0, 10000.0, 1_500_000.0}


def test_the_words_to_find_what_a_statement_may_change_by():
    assert implied_query("The user is done with TAing.") == "ta"
    assert implied_query("I handed in my notice.") == "job"
    assert implied_query("Moving everything to GCP.").split()[:3] == ["aws", "amazon", "web"]
    assert implied_query("The user likes tea.") is None
    assert implied_slots("She took a position in Austin.") == {"home_city"}
    assert implied_slots("The user lives in Austin.") == set()


def _n(memory_id: str, text: str, similarity: float, topic: str | None = None) -> Neighbour:
    return Neighbour(memory_id, text, "profile", memory_id, similarity, topic=topic)


THRESHOLDS = Thresholds(0.9, 0.6, 3, 0.45, 0.05)


def test_an_implied_change_is_routed_whatever_its_similarity_and_only_proposed_unjudged():
    related = [
        _n("ta", "The user TAs the intro to statistics course.", 0.12),
        _n("city", "The user lives in Lyon.", 0.1),
    ]
    text = "The user is done with TAing this term."
    assert [n.memory_id for n in route(text, related, THRESHOLDS, None)] == ["ta"]
    judged = decide(text, "profile", related, THRESHOLDS, can_judge=True)
    assert (judged.action, judged.routed) == ("judge", ("ta",))
    unjudged = decide(text, "profile", related, THRESHOLDS, can_judge=False)
    assert (unjudged.action, unjudged.target, unjudged.proposed) == ("supersede", "ta", True)  # held: both current
    assert unjudged.reason == "may have changed: an ending of what it mentions (no judgement, held for review)"
    other = decide("My brother is done with TAing.", "profile", related, THRESHOLDS, can_judge=False)
    assert other.action == "add"  # someone else's: not proposed


def test_the_judge_is_shown_the_grounds_the_store_read_without_it():
    assert pair_grounds("The user's dad switched to an iPhone.", "phone") == "someone else's, not the user's"
    assert pair_grounds("The user moved the staff meeting to Thursday.", "home_city") == (
        "an event that moved, not a move of the user's"
    )
    assert pair_grounds("The user's dad took up golf.", "hobbies") == "someone else's, not the user's"
    assert pair_grounds("If I moved to Tokyo I'd learn Japanese.", None) == "a hypothetical, not a change"
    assert pair_grounds("The user took up golf.", "hobbies") is None
    assert pair_grounds("The user moved to Lyon.", "home_city") is None
    pair = JudgePair(
        Statement("m1", "The user uses a Pixel 7.", "profile", "phone", date(2024, 5, 8)),
        Statement("new", "The user's dad switched to an iPhone.", "profile", "phone", date(2024, 6, 1)),
        "someone else's, not the user's",
    )
    assert render_pairs([pair]) == (
        "0. (profile, topic phone, 2024-05-08) The user uses a Pixel 7.\n"
        "-> (profile, topic phone, 2024-06-01; read: someone else's, not the user's) The user's dad switched to an iPhone."
    )


def test_number_words_and_ranges_are_numbers():
    assert counts("went from six to nine, then a dozen") == {6.0, 9.0, 12.0}
    assert counts("runs 20-25 km") == {20.0, 25.0}
    assert counts("between eight and ten people") == {8.0, 10.0}


def test_from_x_to_y_names_the_old_and_the_new_value():
    assert change_sides("Migrating to GCP from AWS.") == ("AWS", "GCP")
    assert change_sides("Switched from VS Code to Neovim") == ("VS Code", "Neovim")
    assert change_sides("Moved to Lisbon.") is None
    assert implied_reason("Migrating to GCP from AWS.", "Uses GCP for the data team.") is None
