"""Tokens read by structure (`dreamer.core.secrets.tokens`): listed vendor formats from data, and
any other prefixed random token, named or not."""

from __future__ import annotations

import pytest

from dreamer.core.secrets.redact import redact
from dreamer.core.secrets.tokens import find_tokens

UNLISTED = [  # vendors no table row and no detect-secrets plugin names
    "sbp_9f4c2a7e1b3d5f60718293a4b5c6d7e8f9012345",
    "dp.st.prd.mT089Y17e4tCeDB7XPd2dZTisCUbY1Rxy8qRDv1Q",
    "pul-3c1e9b7a2f4d6e8091a2b3c4d5e6f708192a3b4c",
    "glsa_Q7wE3rT9yU1iO5pA8sD2fG6hJ4kL0zXc_4e8a1f2b",
    "secret_7wcLCoD33LeWgLeg9yJtnpLRiLMHfxMtDq8WYt2Ko5Y",
    "fly_v2_Xq84LmPz01RtYw9KdNa3VbJc",
]


@pytest.mark.parametrize("token", UNLISTED)
def test_a_prefixed_random_token_is_a_secret_whatever_its_vendor(token):
    assert redact(f"the deploy script reads {token} from the vault") == (
        "the deploy script reads [REDACTED:api_token] from the vault"
    )


@pytest.mark.parametrize(
    "text",
    [
        '"tool_call_id": "call_w4yNaRxQeAuZ6svgzAIhI2e4"',  # an object's id
        "customer cus_Nffrfeb7Fo3v1u6zYe8RAqjQ paid",
        'integrity="sha384-oqVuAfXRKap7fdgcCY5uykM6R9GqQ8K1uxy9rx7HNQlGYl1kPzQho1wx4JwY8wC"',
        "the cache key is user_42_preferences_cache_v2_backup_final",
        "release_candidate_20261205",  # one character class after the prefix
        "branch fix-flaky-login-test-on-windows-runners",
    ],
)
def test_ids_hashes_and_identifiers_are_no_tokens(text):
    assert find_tokens(text) == []
    assert redact(text) == text


def test_a_listed_format_names_its_kind_and_an_earlier_row_wins_its_span():
    key = "sk-ant-api03-AoK7qWQObLjhDXH8HjuqGCZ2ErGUUM3k4ugu0zRX8vZ"
    assert find_tokens(f"key {key}") == [(4, 4 + len(key), "anthropic_key")]
    assert redact("hf_3tGDyNJLYYOo7uaDhg4n1wvE5tRnJI9oZb") == "[REDACTED:huggingface_token]"
    assert redact("key-" + "0123456789abcdef" * 2) == "[REDACTED:mailgun_key]"


@pytest.mark.parametrize(
    ("token", "kind"),
    [
        ("AGE-SECRET-KEY-1FEGUAAAEDNANAP0RFZA4F3CRRE50N3XA7SQM0LX747R7T34CE3E5HVM0QX", "private_key"),
        ("ATATT3xFfGF07NlWpopgVHkaRZSjoumQQFQzcmPexqFUs-TViMrm=FE86167E", "atlassian_token"),
    ],
)
def test_a_listed_format_with_an_upper_case_prefix_is_found_alone(token, kind):
    assert redact(f"{token}\n") == f"[REDACTED:{kind}]\n"
