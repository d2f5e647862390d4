import pytest

from dreamer.core.topics import (
    SINGLE_VALUED,
    Topic,
    announces_change,
    cardinality_of,
    change_words,
    describes_present,
    infer_topic,
    normalise_topic,
    same_deadline,
    topic_of,
)


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("home_city", "home_city"),
        ("Home City", "home_city"),
        ("home-city", "home_city"),
        ("city", "home_city"),
        ("location", "home_city"),
        ("lives_in", "home_city"),
        ("user_location", "home_city"),
        ("company", "employer"),
        ("Workplace", "employer"),
        ("employer", "employer"),
        ("note-taking app", "note_app"),
        ("IDE", "editor"),
        ("hobby", "hobbies"),
        ("Allergy", "allergies"),
        ("deadline: Q3 report", "deadline:q3_report"),
        ("Deadline:the Q3-report", "deadline:q3_report"),
        ("favorite color", "favourite_color"),
        ("coffee order", "coffee_order"),
        ("pets", "pets"),
        (" ", None),
        ("null", None),
        (None, None),
    ],
)
def test_spelling_variants_meet(raw, key):
    assert normalise_topic(raw) == key


def test_cardinality_of_known_and_prefixed_slots():
    assert {cardinality_of(k) for k in SINGLE_VALUED} == {"one"}
    assert cardinality_of("deadline:launch") == "one"
    assert cardinality_of("favourite_band") == "one"
    assert cardinality_of("habit:gym") == "one"
    assert cardinality_of("hobbies") == "many"
    assert cardinality_of("coffee_order") is None
    assert cardinality_of(None) is None


def test_a_known_slot_keeps_its_cardinality_and_an_unknown_one_defaults_to_many():
    assert topic_of("city", "many") == Topic("home_city", "one")
    assert topic_of("coffee order", "one") == Topic("coffee_order", "one")
    assert topic_of("coffee order", None) == Topic("coffee_order", "many")
    assert topic_of(None, "one") is None


@pytest.mark.parametrize(
    ("text", "kind", "topic"),
    [
        ("The user lives in Boston.", "profile", Topic("home_city", "one")),
        ("I just moved to Denver last month.", "profile", Topic("home_city", "one")),
        ("The user works at Initech.", "profile", Topic("employer", "one")),
        ("Big news: I accepted a new job at Globex.", "profile", Topic("employer", "one")),
        ("She was promoted to senior engineer.", "profile", Topic("job_title", "one")),
        ("The user works as a designer.", "profile", Topic("job_title", "one")),
        ("The user works as a night-shift nurse at Riverside General.", "profile", Topic("employer", "one")),
        ("The user is a junior data analyst at Northwind Insurance.", "profile", Topic("employer", "one")),
        ("The user works as an engineer for a bank.", "profile", Topic("employer", "one")),
        ("The user is vegetarian now.", "preference", Topic("diet", "one")),
        ("Dana has no dietary restrictions.", "profile", Topic("diet", "one")),
        ("Dana eats gluten-free since the diagnosis.", "preference", Topic("diet", "one")),
        ("Dana teaches middle school maths.", "profile", Topic("job_title", "one")),
        ("These days I use Neovim for everything.", "preference", Topic("editor", "one")),
        ("The user keeps their notes in Obsidian.", "preference", Topic("note_app", "one")),
        ("The deadline for the Q3 report moved to Friday.", "focus", Topic("deadline:q3_report", "one")),
        ("The launch deadline is May 3.", "focus", Topic("deadline:launch", "one")),
        ("My favourite band is Low.", "preference", Topic("favourite_band", "one")),
        ("Sam is allergic to penicillin.", "profile", Topic("allergies", "many")),
        ("The user speaks Portuguese.", "profile", Topic("languages", "many")),
        ("I took up pottery.", "profile", Topic("hobbies", "many")),
        ("The user reads email in Outlook.", "preference", Topic("email_client", "one")),
        ("The user's phone is a Pixel 6.", "profile", Topic("phone", "one")),
        ("The user's car is a 2012 Honda Civic.", "profile", Topic("car", "one")),
        ("The user sold their car and got an e-bike.", "profile", Topic("car", "one")),
        ("The user drives a Golf.", "profile", Topic("car", "one")),
        ("The user's deadline is now on 30 April.", "focus", Topic("deadline", "one")),
        ("The user's submission date is on 20 May.", "focus", Topic("deadline", "one")),
        ("The user's exam is now on 14 January.", "focus", Topic("deadline:exam", "one")),
        ("The user goes to the gym three times a week.", "preference", Topic("habit:gym", "one")),
        ("The user quit the gym.", "preference", Topic("habit:gym", "one")),
        ("The user has started smoking.", "preference", Topic("habit:smoking", "one")),
        ("The user stopped going to yoga.", "preference", Topic("habit:yoga", "one")),
        ("The user has started eating fish.", "preference", Topic("diet", "one")),
        ("The user is an icu nurse.", "profile", Topic("job_title", "one")),
        ("The user is now a senior data analyst.", "profile", Topic("job_title", "one")),
        ("The user starts a new job at Globex on Monday.", "profile", Topic("employer", "one")),
        ("The user uses VS Code.", "preference", Topic("editor", "one")),
    ],
)
def test_infer_topic_from_clear_phrasing(text, kind, topic):
    assert infer_topic(text, kind) == topic


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("The user likes long walks.", "preference"),
        ("Maybe I should move to Denver?", "profile"),
        ("I'm thinking about moving to Lisbon.", "profile"),
        ("The cache lives in Redis.", "design_decision"),
        ("The user washed the car.", "profile"),
        ("The user quit it.", "preference"),
        ("The user has started a new chapter.", "preference"),
        ("The user is a big fan of nurses.", "profile"),
        ("The user is a manager's worst nightmare.", "profile"),
        ("The user handed in their notice at Acme.", "profile"),
        ("The user teaches her son to ride a bike.", "profile"),
    ],
)
def test_no_topic_without_clear_phrasing(text, kind):
    assert infer_topic(text, kind) is None


def test_present_states():
    assert describes_present("These days I use Neovim.", "preference")
    assert describes_present("The user currently lives in Denver.", "profile")
    assert describes_present("Ship the beta.", "focus")
    assert not describes_present("The user was born in Lyon.", "profile")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("The user moved to Denver.", {"moved"}),
        ("The user no longer eats meat.", {"no longer"}),
        ("These days the user writes in Obsidian instead.", {"these days", "instead"}),
        ("The user accepted a new job at a startup.", {"accepted", "new job"}),
        ("The user lives in Denver.", set()),
        ("The user knows a nowhere man.", set()),
    ],
)
def test_change_words(text, words):
    assert change_words(text) == words
    assert announces_change(text) is bool(words)


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("deadline:exam", "deadline:spanish_exam", True),
        ("deadline:app_launch", "deadline:launch", True),
        ("deadline", "deadline:thesis", True),
        ("deadline:thesis", "deadline:thesis", True),
        ("deadline:q3_report", "deadline:annual_report", False),
        ("deadline:launch", "deadline:exam", False),
        ("deadline", "home_city", False),
        ("employer", "employer", True),
    ],
)
def test_a_deadline_said_in_fewer_words_may_be_the_same_one(a, b, same):
    assert same_deadline(a, b) is same
    assert same_deadline(b, a) is same
