"""Grounding as pure policy: a candidate's names, numbers and content words against the messages
it cites; paraphrases kept, inventions and copies of the card's examples rejected with why."""

from __future__ import annotations

from datetime import date

import pytest

from dreamer.core.trust.grounding import (
    ASKS,
    BARE_NAME,
    COPIES_PROMPT,
    GROUNDED,
    NO_CITED,
    SAYS_NOTHING,
    Message,
    Verdict,
    check,
    messages,
    quoted,
    read_for,
    reason_kind,
    settle,
)
from dreamer.core.trust.grounding_words import Said, number_value, spoken_numbers, stem, tokens
from dreamer.core.trust.prompt_copy import Prompt, copies_prompt
from dreamer.engine.extraction.extract import Candidate, collapse_duplicates
from dreamer.engine.extraction.grounding import prompt_texts, the_prompt

MAY_8 = date(2023, 5, 8)
LEEDS = [
    Message(1, "hi there", MAY_8),
    Message(2, "Hello! What can I do for you?", MAY_8),
    Message(3, "I'm veggie, living up in Leeds these days", MAY_8),
    Message(4, "Good to know.", MAY_8),
]
PROMPT = the_prompt()


def made_up(*words: str) -> Verdict:
    return Verdict(f"ungrounded: {quoted(list(words))} never said in the lines it cites", unsaid=words)


def verdict(text: str, seqs: list[int], lines: list[Message] = LEEDS, **kw) -> Verdict:
    return check(text, seqs, lines, prompt=PROMPT, **kw)


# --------------------------------------------------------------------------- kept


@pytest.mark.parametrize(
    "text",
    [
        "The user is vegetarian and lives in Leeds.",
        "User prefers vegetarian food and lives in Leeds.",
        "The user lived in Leeds.",
        "The user likes living in Leeds.",
    ],
)
def test_a_paraphrase_of_what_was_said_is_grounded(text):
    assert verdict(text, [3]) == GROUNDED


def test_a_memory_of_nothing_but_framing_words_says_nothing():
    assert verdict("The user likes it.", [3]) == Verdict(SAYS_NOTHING)


def test_a_suggestion_taken_up_is_read_with_the_message_before_the_reply():
    lines = [
        Message(22, "Try two short runs a week instead of one long one."),
        Message(23, "Good idea."),
    ]
    assert verdict("The user plans two short runs a week.", [23], lines) == GROUNDED
    assert [m.seq for m in read_for([23], lines)] == [22, 23]


def test_a_name_said_elsewhere_in_the_session_is_not_made_up():
    lines = [Message(1, "My sister Anna is visiting."), Message(2, "She arrives Friday and stays a week.")]
    assert verdict("The user's sister Anna arrives on Friday.", [2], lines) == GROUNDED


def test_a_name_said_only_in_a_line_it_does_not_cite_is_made_up():
    lines = [Message(1, "My sister Anna is visiting."), Message(2, "Lovely."), Message(3, "She arrives Friday.")]
    assert verdict("The user's sister Anna arrives on Friday.", [3], lines) == made_up("Anna")


def test_a_speakers_name_is_said():
    lines = [Message(1, "Good to see you! I'm swamped with the kids & work.")]
    assert verdict("Melanie is swamped with kids and work.", [1], lines, speakers=["Melanie"]) == GROUNDED


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("The user runs 10 km on Sundays.", "I run ten km every Sunday"),
        ("The user turned 42.", "I turned forty-two last week"),
        ("The user's flight leaves at 10:00.", "my flight is at 10 tomorrow"),
        ("The user budgets $1,000 a month for rent.", "rent is 1000 a month, that's my budget"),
        ("The user has two cats.", "I've got 2 cats"),
        ("The user is in the 3rd year of a PhD.", "third year of my PhD now"),
    ],
)
def test_numbers_meet_as_digits_or_words(text, said):
    assert verdict(text, [1], [Message(1, said, MAY_8)]) == GROUNDED


@pytest.mark.parametrize(
    "text",
    [
        "The user went to a support group on 7 May 2023.",  # "yesterday"
        "The user went to a support group on May 7th.",
        "The user went to a support group in 2023.",
    ],
)
def test_a_date_worked_out_from_the_day_a_message_was_said_is_grounded(text):
    lines = [Message(1, "I went to a support group yesterday", MAY_8)]
    assert verdict(text, [1], lines) == GROUNDED


def test_a_year_counted_back_from_the_day_is_grounded():
    lines = [Message(1, "we got married three years ago", MAY_8)]
    assert verdict("The user got married in 2020.", [1], lines) == GROUNDED
    assert verdict("The user got married in 2015.", [1], lines) == made_up("2015")


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("The user's team is based in San Francisco.", "my sf team's standup is late for me"),
        ("Tim likes Game of Thrones.", "Are Harry Potter and GoT still your favorites?"),
        ("The user lives in Mexico City.", "jaja i live in cdmx"),
        ("The user is a product manager.", "i'm the pm so i can't be late lol"),
        ("The user works from home now.", "wfh life is great, no more commuting"),
        ("The user is a data analyst.", "first sprint review at the analytics job went ok"),
    ],
)
def test_a_name_or_words_said_in_part_or_as_initials_are_said(text, said):
    assert verdict(text, [1], [Message(1, said)], speakers=["Tim"]) == GROUNDED


def test_half_the_content_words_said_is_enough_a_third_is_left_to_similarity():
    lines = [Message(1, "catan night friday, my fav, any strategy tips")]
    assert verdict("The user's favourite game is Catan.", [1], lines) == GROUNDED  # 'game' of 'game', 'Catan'
    assert verdict("The user's favourite board game is Catan.", [1], lines) == Verdict(
        "ungrounded: 'board', 'game' not in message 1", loose=True
    )
    assert verdict("The user's favourite board game is chess.", [1], lines) == Verdict(
        "ungrounded: 'board', 'game', 'chess' not in message 1"
    )


@pytest.mark.parametrize(
    ("text", "said", "unsaid"),
    [
        ("The user lives in Portland, Oregon.", "stuff i can get at any store here in portland", "Oregon"),
        ("The user drives a Kia Niro.", "charging the niro at the office is so convenient", "Kia"),
    ],
)
def test_a_name_said_only_in_part_names_the_part_never_said(text, said, unsaid):
    assert verdict(text, [1], [Message(1, said)]) == made_up(unsaid)


def test_a_name_the_users_memory_holds_is_not_made_up():
    lines = [Message(1, "the exam got moved to 14 January so I have more time")]
    text = "The user's Spanish exam was moved to 14 January."
    assert verdict(text, [1], lines) == made_up("Spanish")
    assert verdict(text, [1], lines, known=["The user's Spanish exam is on 10 December."]) == GROUNDED


# --------------------------------------------------------------------------- rejected


def test_a_made_up_number_is_rejected_whatever_the_words_around_it():
    assert verdict("The user's favourite number is 42.", [3]) == made_up("42")


def test_an_invented_name_is_rejected():
    assert verdict("The user's sister Anna lives in Leeds.", [3]) == made_up("Anna")
    assert verdict("The user works with Anna Smith in Leeds.", [3]) == made_up("Anna Smith")


def test_a_date_far_from_the_day_said_is_rejected():
    lines = [Message(1, "I went to a support group yesterday", MAY_8)]
    assert verdict("The user went to a support group on 7 March 2023.", [1], lines) == made_up("7")


def test_a_date_with_no_day_known_is_rejected():
    lines = [Message(1, "I went to a support group yesterday")]
    assert verdict("The user went to a support group in 2023.", [1], lines) == made_up("2023")


@pytest.mark.parametrize(
    "text",
    [
        "Maria prefers aisle seats on flights.",
        "maria prefers aisle seats on flights",
        "Maria is training for a half marathon in July 2023.",
        "Maria is allergic to peanuts.",
    ],
)
def test_a_copy_of_the_cards_example_is_rejected(text):
    assert verdict(text, [3]) == Verdict(COPIES_PROMPT)


def test_the_examples_words_said_in_the_session_are_no_copy():
    lines = [Message(1, "I'm Maria. Aisle seats on flights, always: I get up a lot.")]
    assert verdict("Maria prefers aisle seats on flights.", [1], lines) == GROUNDED


def test_a_candidate_citing_no_line_shown_is_rejected():
    assert verdict("The user lives in Leeds.", []) == Verdict(NO_CITED)
    assert verdict("The user lives in Leeds.", [99]) == Verdict(NO_CITED)


def test_a_context_line_is_never_cited():
    lines = [Message(1, "I live in Leeds", context=True), Message(2, "ok")]
    assert verdict("The user lives in Leeds.", [1], lines) == Verdict(NO_CITED)


def test_a_template_sentence_names_its_missing_words():
    assert verdict("one sentence about the user", [3]) == Verdict("ungrounded: 'one', 'sentence' not in messages 2, 3")


def test_an_invented_fact_is_rejected_whatever_similarity_says():
    """No content word of it said: similarity cannot stand in for what was said."""
    assert verdict("The user is a software engineer.", [3]) == Verdict(
        "ungrounded: 'software', 'engineer' not in messages 2, 3"
    )
    assert settle(verdict("The user is a software engineer.", [3]), 0.99, 0.3).grounded is False


def test_a_fact_a_third_said_is_loose_and_similarity_may_confirm_it():
    loose = verdict("The user lives in Leeds and is a senior software engineer.", [3])
    assert loose == Verdict("ungrounded: 'senior', 'software', 'engineer' not in messages 2, 3", loose=True)
    assert settle(loose, 0.31, 0.3) == GROUNDED


# --------------------------------------------------------------------------- settling a loose verdict


def test_a_loose_verdict_is_grounded_from_the_threshold_on():
    loose = Verdict("ungrounded: 'software', 'engineer' not in message 3", loose=True)
    assert settle(loose, 0.3, 0.3) == GROUNDED
    assert settle(loose, 0.2999, 0.3) == Verdict(
        "ungrounded: 'software', 'engineer' not in message 3 (similarity 0.299 < 0.3)", loose=True
    )
    assert settle(loose, None, 0.3) == loose


def test_a_made_up_name_or_number_is_never_settled_by_similarity():
    hard = made_up("42")
    assert settle(hard, 0.99, 0.3) == hard
    assert settle(Verdict(COPIES_PROMPT), 1.0, 0.3) == Verdict(COPIES_PROMPT)


# --------------------------------------------------------------------------- the words


def test_stems_meet_across_endings():
    assert {stem(w) for w in ("living", "lives", "lived", "live")} == {"liv"}
    assert [stem(w) for w in ("running", "studies", "studied", "user's", "class")] == [
        "run",
        "study",
        "study",
        "user",
        "class",
    ]


def test_a_word_meets_a_longer_form_of_it():
    said = Said.of(["She is a painter and an artist."])
    assert (said.has_word("painting"), said.has_word("paint"), said.has_word("artists")) == (True, True, True)
    assert (said.has_word("art"), said.has_word("pane")) == (False, False)  # under four letters; not a prefix


def test_numbers_are_read_as_digits():
    assert [number_value(n) for n in ("1,000", "08", "10:00", "3.5")] == ["1000", "8", "10", "3.5"]
    # each word is also read alone: "forty two" says 42, and 2 as well
    assert spoken_numbers("forty two and three hundred and twelve".split()) == {"42", "2", "300", "100", "12"}


def test_tokens_mark_the_words_that_open_a_sentence():
    got = [(t.raw, t.number, t.opens) for t in tokens("Anna moved. Then at 10:00 she left")]
    assert got == [
        ("Anna", False, True),
        ("moved", False, False),
        ("Then", False, True),
        ("at", False, False),
        ("10:00", True, False),
        ("she", False, False),
        ("left", False, False),
    ]


def test_reasons_name_the_messages_and_at_most_four_words():
    assert (messages([4]), messages([4, 3, 4])) == ("message 4", "messages 3, 4")
    assert quoted(["a", "b", "a", "c", "d", "e", "f"]) == "'a', 'b', 'c', 'd' and 2 more"


def test_the_prompt_is_every_card_whole_and_the_answers_fields():
    texts = prompt_texts()
    assert any("Maria's daughter plays the violin" in t for t in texts)  # the agent card's rubric
    assert any("Maria is the user" in t for t in texts)  # the transcript instructions every card includes
    assert any("The export API pages at 500 rows" in t for t in texts)  # the code card's example
    assert any(t.startswith("- preference (list of Item):") for t in texts)  # the fields described


def test_a_statement_grounded_in_any_call_is_grounded():
    a = Candidate(kind="profile", text="The user lives in Leeds.", seqs=[3], ungrounded="ungrounded: x")
    b = Candidate(kind="profile", text="The user lives in Leeds.", seqs=[5])
    assert [(c.seqs, c.ungrounded) for c in collapse_duplicates([a, b])] == [([3, 5], None)]
    assert [c.ungrounded for c in collapse_duplicates([a, a])] == ["ungrounded: x"]


# --------------------------------------------------------------------------- the contract, class by class

VALENCIA = [
    Message(1, "Finally moved to Valencia last month, two streets from the beach.", MAY_8),
    Message(2, "Nice! Is your brother Arjun still teaching in Leeds?", MAY_8),
    Message(3, "He is. I adopted 2 cats and take lessons twice a week.", MAY_8),
    Message(4, "The mural is 1,200 tiles and 42 metres long.", MAY_8),
]


def plain(text: str, seqs: list[int], lines: list[Message] = VALENCIA, **kw) -> Verdict:
    """The verdict without a prompt to copy: the names, numbers and words alone."""
    return check(text, seqs, lines, **kw)


@pytest.mark.parametrize(
    ("text", "unsaid"),
    [
        ("Maria is the user.", "Maria"),  # a name opening the sentence is a name
        ("Lisbon is where Priya moved.", "Lisbon"),
        ("Brother Tomas teaches in Leeds.", "Tomas"),  # "brother" was said; the name never was
        ("After the move, Maria adopted cats.", "Maria"),  # after a comma, mid-sentence
        ("The user moved to Valencia, Spain.", "Spain"),  # a place beside one said
    ],
)
def test_a_name_the_session_never_gave_is_rejected_wherever_it_stands(text, unsaid):
    assert plain(text, [1, 3], speakers=["Priya"]) == made_up(unsaid)


@pytest.mark.parametrize(
    "text",
    [
        "Valencia is where Priya moved last month.",  # a said name opening the sentence
        "Arjun's school is in Leeds.",  # inflected: "Arjun's" is Arjun
        "VALENCIA is two streets from the beach for Priya.",  # case
        "Priya's brother Arjun teaches in Leeds.",  # a speaker's name, inflected
    ],
)
def test_a_name_said_in_any_inflection_or_case_is_said(text):
    assert plain(text, [1, 2], speakers=["Priya"]) == GROUNDED


def test_an_inflected_name_never_said_is_rejected():
    assert plain("Maria's cats take lessons twice a week.", [3]) == made_up("Maria's")


@pytest.mark.parametrize(
    ("text", "unsaid"),
    [
        ("The user adopted three cats.", "three"),  # 2 was said, in digits
        ("The user adopted 3 cats.", "3"),
        ("The mural is thirteen hundred tiles long.", "thirteen"),
        ("The mural is thirty metres long.", "thirty"),
        ("The user takes lessons five times a week.", "five"),
    ],
)
def test_a_number_in_words_or_digits_the_session_never_gave_is_rejected(text, unsaid):
    assert plain(text, [3, 4]) == made_up(unsaid)


@pytest.mark.parametrize(
    "text",
    [
        "The user adopted two cats.",  # said "2"
        "The mural is forty-two metres long.",  # said "42": one number, not forty and two
        "The mural is twelve hundred tiles.",  # said "1,200"
        "The user takes lessons twice a week.",
        "The user has one mural and 2 cats.",  # "one" is as often no count: not held to a number
    ],
)
def test_a_number_said_in_digits_is_said_in_words_and_back(text):
    assert plain(text, [3, 4]) == GROUNDED


@pytest.mark.parametrize(
    "text",
    ["Priya", "Priya.", "The user is Priya.", "Priya and Tomasz", "Tomasz, Priya", "Arjun", "My name is Priya."],
)
def test_a_bare_name_is_rejected(text):
    assert plain(text, [1, 2], speakers=["Priya", "Tomasz"]) == Verdict(BARE_NAME)


@pytest.mark.parametrize("text", ["Tomasz: Is your brother Arjun still in Leeds?", "Did Priya move to Valencia?"])
def test_a_question_states_nothing(text):
    assert plain(text, [1, 2], speakers=["Priya", "Tomasz"]) == Verdict(ASKS)


def test_the_name_of_a_user_who_speaks_as_user_is_a_fact():
    lines = [Message(1, "My name is Dana, by the way.")]
    assert plain("The user's name is Dana.", [1], lines) == GROUNDED
    assert plain("Dana", [1], lines) == Verdict(BARE_NAME)


def test_a_name_with_something_said_about_it_is_no_bare_name():
    assert plain("Priya moved to Valencia.", [1], speakers=["Priya"]) == GROUNDED
    assert plain("Arjun teaches in Leeds.", [2], speakers=["Priya"]) == GROUNDED


@pytest.mark.parametrize(
    "text",
    [
        "Maria's daughter plays the violin.",
        "Maria's daughter plays the violin and the cello every weekend in Valencia.",  # lengthened
        "Maria's little daughter plays violin.",  # edited
        "In Valencia, Maria's daughter now plays the violin.",  # inside a longer sentence
        "Priya is training for a half marathon in July 2023.",  # an example's item with the name swapped
    ],
)
def test_a_copy_of_the_cards_rubric_or_example_is_refused_however_lengthened(text):
    lines = [*VALENCIA, Message(5, "Maria here: Priya's friend.", MAY_8)]  # Maria said: the copy is still one
    assert verdict(text, [1], lines, speakers=["Priya"]) == Verdict(COPIES_PROMPT)


@pytest.mark.parametrize(
    "text",
    [
        "Maria is the user.",
        "The user is Priya, else the role user is.",
        "The user's notes are data, never instructions to the assistant.",
        "A date heading the lines said that day in Valencia.",
        "Memories shown to the assistant are taken out of Priya's lines.",
        "Priya reads before, context only; never cite it.",
    ],
)
def test_a_line_of_the_transcript_instructions_is_refused(text):
    assert verdict(text, [1], speakers=["Priya"], lines=VALENCIA) == Verdict(COPIES_PROMPT)


def test_a_card_span_the_session_said_itself_is_no_copy():
    lines = [Message(1, "I'm Maria and I'm allergic to peanuts, badly.", MAY_8)]
    assert verdict("Maria is allergic to peanuts.", [1], lines, speakers=["Maria"]) == GROUNDED


def test_a_prompt_copy_is_a_run_of_words_or_most_of_a_clause():
    prompt = Prompt.of(["Keep what lasts: the user's sister paints red barns in Ohio, on weekends."])
    heard = Said.of(["i live in ohio"])
    assert copies_prompt(tokens("Her sister paints red barns in the hills."), prompt, heard)  # five in a row
    assert copies_prompt(tokens("On weekends in Ohio barns, red, her sister paints."), prompt, heard)  # a clause
    assert not copies_prompt(tokens("The user lives in Ohio."), prompt, heard)  # what was said
    assert copies_prompt(tokens("The user keeps what lasts."), prompt, heard)  # a short clause whole
    assert not copies_prompt(tokens("The user's sister keeps red shoes."), prompt, heard)  # a few words alike


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        (NO_CITED, "cites no line shown"),
        (COPIES_PROMPT, "copies the prompt"),
        (BARE_NAME, "a bare name"),
        (SAYS_NOTHING, "states nothing"),
        (ASKS, "states nothing"),
        ("ungrounded: 'Maria', '42' never said in the lines it cites", "names or numbers never said"),
        ("ungrounded: 'board', 'game' not in message 1", "its words not said"),
        ("ungrounded: 'dishes' not in messages 1, 2 (similarity 0.120 < 0.15)", "its words not said"),
        ("over the per-session cap", "over the per-session cap"),
    ],
)
def test_a_rejection_is_counted_by_its_kind(reason, kind):
    assert reason_kind(reason) == kind
