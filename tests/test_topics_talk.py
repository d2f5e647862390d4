"""Slots read from how the rules extractor writes ordinary talk: tool switches named by the
product, diets said as what is eaten, teams, phones, email clients and dates said as due."""

from __future__ import annotations

import pytest

from dreamer.core.topics import Topic, infer_topic


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("The user switched from Sublime to Neovim.", "editor"),
        ("The user went with Obsidian.", "note_app"),
        ("The user has started eating fish.", "diet"),
        ("The user doesn't eat meat.", "diet"),
        ("The user switched from their Pixel 7 to an iPhone 15.", "phone"),
        ("The user is on the payments team.", "team"),
        ("The user no longer uses Outlook.", "email_client"),
        ("The user reads email in Thunderbird.", "email_client"),
        ("The user's thesis is due on 15 March.", "deadline:thesis"),
        ("The user's launch is now on 15 July.", "deadline:launch"),
        ("The user's review got pushed back to 12 June.", "deadline:review"),
        ("The user's thesis deadline moved to 30 April.", "deadline:thesis"),
        ("The user's app launch is planned for 1 June.", "deadline:app_launch"),
        ("The user moved to the fraud detection team.", "team"),
    ],
)
def test_a_slot_is_read_from_ordinary_phrasing(text, key):
    assert infer_topic(text, "preference") == Topic(key, "one")


@pytest.mark.parametrize(
    "text", ["The user is on holiday.", "The user's dog is called Pixel.", "The user is on the fence about it."]
)
def test_no_slot_is_guessed_from_a_lookalike(text):
    assert infer_topic(text, "profile") is None
