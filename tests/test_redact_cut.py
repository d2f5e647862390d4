"""Cutting long text without splitting a secret, and the secret formats added for the
reliability corpus."""

from __future__ import annotations

import pytest

from dreamer.core.secrets.redact import PREFIX_MARGIN, clean_prefix, redact, safe_cut

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.mark.parametrize("before", [1, 5, 20, 39])
def test_clean_prefix_never_keeps_the_head_of_a_secret(before):
    """The token starts `before` characters ahead of the cut at 100."""
    text = "x" * (99 - before) + " " + TOKEN + " tail"
    out = clean_prefix(text, 100)
    assert out == "x" * (99 - before) + " [REDACTED:github_token]"


def test_clean_prefix_drops_a_secret_that_starts_after_the_cut():
    assert clean_prefix("x" * 99 + " " + TOKEN, 100) == "x" * 99 + " "


def test_clean_prefix_of_short_text_is_clean_for_model():
    assert clean_prefix(f"use {TOKEN} <memory-context>x</memory-context>", 1000) == "use [REDACTED:github_token] "


def test_clean_prefix_reads_only_a_margin_past_the_cut():
    text = "y" * 50 + "z" * (10 * PREFIX_MARGIN) + TOKEN
    assert clean_prefix(text, 50) == "y" * 50


@pytest.mark.parametrize("at", [60, 80, 99])
def test_safe_cut_leaves_a_secret_across_the_cut_out_whole(at):
    text = "x" * at + " " + TOKEN + " end"
    out = safe_cut(text, 100)
    assert TOKEN[:4] not in out and out == "x" * at + " "


def test_safe_cut_keeps_secrets_before_the_cut_for_redaction_later():
    text = f"a {TOKEN} b" + "c" * 200
    assert safe_cut(text, 100) == text[:100]


@pytest.mark.parametrize(
    "text, kind",
    [
        ("doctl auth init -t dop_v1_" + "ab12" * 16, "digitalocean_token"),
        ("token hvs.CAESIJ" + "x1" * 20, "vault_token"),
        ("shpat_" + "0a" * 16, "shopify_token"),
        ("the mailgun key is key-" + "9f" * 16, "mailgun_key"),
        ("lin_api_" + "Ab3" * 14, "linear_key"),
        ("PMAK-" + "1a" * 12 + "-" + "2b" * 17, "postman_key"),
        ("dapi" + "c3" * 16, "databricks_token"),
        ("bot 1234567890:AA" + "Bc1_" * 9, "telegram_bot_token"),
        ("https://discord.com/api/webhooks/1234/" + "Zx9-" * 12, "discord_webhook"),
        ("Authorization: SSWS 00" + "Qw7" * 14, "authorization"),
        ("sshpass -p hunter2x ssh root@box", "password"),
        ("mysql -u root -pS3cretPw db", "password"),
        ("curl -u admin:Adm1nPw https://x", "password"),
        ("machine api.example.com\n  login bob\n  password N3trcPw", "password"),
    ],
)
def test_added_secret_formats(text, kind):
    assert f"[REDACTED:{kind}]" in redact(text)


@pytest.mark.parametrize(
    "text",
    [
        "mysql -u root -p",
        "mysql -h db --port 3306",
        "curl -u bob https://x",
        "the machine password policy",
        "sshpass is a tool",
        "key-value store",
        "Authorization: Bearer",
    ],
)
def test_added_rules_leave_ordinary_text_alone(text):
    assert redact(text) == text
