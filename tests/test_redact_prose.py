"""Secrets said in prose (passwords, passphrases, PINs) and personal numbers (social security
numbers, IBANs, phone numbers the words say are someone's) are redacted; the ordinary numbers
and words next to them are not."""

from __future__ import annotations

import pytest

from dreamer.core.secrets.prose import iban_ok
from dreamer.core.secrets.redact import find_secrets, redact

PROSE = [
    ("password", "my password is hunter2", "hunter2"),
    ("password", "My password is swordfish.", "swordfish"),
    ("password", "the password for the router is Tr0ub4dor&3, write it down", "Tr0ub4dor&3"),
    ("wifi_password", "The wifi password is 'blue fox 99'", "blue fox 99"),
    ("password", "my github password's Zebra-77-stripes", "Zebra-77-stripes"),
    ("password", "I changed my password to Kettle#Lamp42 yesterday", "Kettle#Lamp42"),
    ("password", "the password of my bank account is now maple2019 and nobody knows", "maple2019"),
    ("password", "Passcode: 99bottles", "99bottles"),
    ("passphrase", "passphrase: correct horse battery staple", "correct horse battery staple"),
    ("passphrase", "My passphrase is purple monkey dishwasher.", "purple monkey dishwasher"),
    ("passphrase", 'the gpg passphrase is "tiny green frogs sing"', "tiny green frogs sing"),
    ("pin", "PIN is 4821", "4821"),
    ("pin", "my PIN code is 907311, don't tell anyone", "907311"),
    ("alarm_code", "The pin for the alarm is 2580.", "2580"),
    ("password", "the password hunter2 still works", "hunter2"),
    ("pin", "card PIN: 1357", "1357"),
    ("ssn", "my SSN is 078-05-1120", "078-05-1120"),
    ("ssn", "Social security number: 219 09 9999", "219 09 9999"),
    ("ssn", "SS# 457555462 on the form", "457555462"),
    ("iban", "Send it to GB82 WEST 1234 5698 7654 32 please", "GB82 WEST 1234 5698 7654 32"),
    ("iban", "IBAN DE89370400440532013000", "DE89370400440532013000"),
    ("iban", "my account: NO93 8601 1117 947", "NO93 8601 1117 947"),
    ("phone", "my phone number is +47 912 34 567", "+47 912 34 567"),
    ("phone", "Call me at (415) 555-2671 after six", "(415) 555-2671"),
    ("phone", "my mobile is 07700 900461.", "07700 900461"),
    ("phone", "text me on +1-202-555-0143", "+1-202-555-0143"),
]


@pytest.mark.parametrize(("kind", "text", "secret"), PROSE, ids=[f"{i:02d}-{c[0]}" for i, c in enumerate(PROSE)])
def test_a_secret_said_in_prose_is_redacted_whole(kind, text, secret):
    out = redact(text)
    assert out == text.replace(secret, f"[REDACTED:{kind}]")
    assert redact(out) == out


NEAR_MISSES = [
    "the password is wrong",
    "My password is too short, the form says.",
    "the password is stored in the vault",
    "the password is 16 characters long",
    "the password is in 1Password",
    "my password is the name of my dog",
    "I sent the password to Bob",
    "The password reset flow sends an email with a one-time link.",
    "password manager",
    "the passphrase is required for every login",
    "the passphrase is stored in the keychain",
    "pin 3 is ground and pin 4 is 5 V",
    "my PIN is the same as before",
    "pin the tab, then pin 12 more",
    "the PIN number is printed on the letter",
    "room 101-22-3333 is on the second floor",
    "my social security office is on 5th street; ticket 078-05-1120",
    "order DE89 3704 0044 0532 0130 01 (not a valid IBAN)",
    "GB82 WEST 1234 5698 7654 33",
    "The ISBN is 978-3-16-148410-0.",
    "Contact alice@example.com or call +1 415 555 2671.",
    "call me at 5 pm",
    "call me at 10:30 tomorrow",
    "my number is 42",
    "my phone number is on the card",
    "the invoice number is 2024-000123",
    "we shipped 1234567 units in 2023",
    "the meeting is on 2024-05-01 at 14:30",
    "port 5432, timeout 30000 ms, version 3.11.7",
    "my password manager is great",
    "the password: see the vault",
]


@pytest.mark.parametrize("text", NEAR_MISSES)
def test_ordinary_words_and_numbers_are_kept(text):
    assert redact(text) == text
    assert find_secrets(text) == []


def test_an_iban_is_one_whose_checksum_holds():
    assert iban_ok("GB82 WEST 1234 5698 7654 32")
    assert iban_ok("DE89370400440532013000")
    assert iban_ok("NO9386011117947")
    assert not iban_ok("GB82 WEST 1234 5698 7654 33")  # the checksum fails
    assert not iban_ok("DE8937040044053201300")  # one short of Germany's 22
    assert not iban_ok("ZZ00")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("passphrase: correct horse battery staple", "passphrase: [REDACTED:passphrase]"),
        ("my passphrase is lemon tree under blue sky", "my passphrase is [REDACTED:passphrase]"),
        ("the passphrase is correct", "the passphrase is correct"),
        ("the passphrase is correct now", "the passphrase is correct now"),
        ("the passphrase is case sensitive", "the passphrase is case sensitive"),
        ("the passphrase is written on paper", "the passphrase is written on paper"),
    ],
)
def test_a_passphrase_of_plain_words_is_redacted_and_a_description_kept(text, expected):
    assert redact(text) == expected
