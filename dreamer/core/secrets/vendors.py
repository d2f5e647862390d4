"""Vendor token formats, as the maintained `detect-secrets` library knows them (AWS access key ids,
GitHub, GitLab, Slack, Stripe live keys, Twilio, SendGrid, PyPI, JWTs, Azure storage keys, Telegram
bot tokens, Mailchimp, Square, Artifactory, Discord bot tokens, IBM and Cloudant credentials).

Its plugins' patterns are read once; a match is taken to the end of its token (a pattern may
stop short of it), and stands alone: no letter or digit just before or after it."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector

_KINDS: dict[str, str] = json.loads(  # a plugin's secret type -> the kind it is redacted as
    files("dreamer.core.secrets").joinpath("vendor_kinds.json").read_text(encoding="utf-8")
)
_BY_PATTERN = (("hooks\\.slack", "slack_webhook"), ("aws.{", "aws_secret_key"))  # one plugin, two kinds
_SKIPPED = {"Public IP (ipv4)"}  # an address is no secret
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9_\-]")
_DELIMITERS = " \t\r\n=:\"'"


@cache
def patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(kind, pattern) of every regex-based detect-secrets plugin."""
    out: list[tuple[str, re.Pattern[str]]] = []
    plugins: dict[str, type] = get_mapping_from_secret_type_to_class()
    for secret_type, plugin in sorted(plugins.items()):
        if not issubclass(plugin, RegexBasedDetector) or secret_type in _SKIPPED:
            continue
        kind = _KINDS.get(secret_type) or re.sub(r"\W+", "_", secret_type.lower()).strip("_")
        denylist: list[re.Pattern[str]] = list(plugin().denylist)
        out += [(next((k for part, k in _BY_PATTERN if part in rx.pattern), kind), rx) for rx in denylist]
    return tuple(out)


def find_vendor_tokens(text: str) -> list[tuple[int, int, str]]:
    """(start, end, kind) of each vendor token in `text`."""
    found: list[tuple[int, int, str]] = []
    for kind, rx in patterns():
        for m in rx.finditer(text):
            group = next((g for g in range(rx.groups, 0, -1) if m.group(g)), 0)
            start, end = m.span(group)
            while start < end and text[start] in _DELIMITERS:  # "=AKC...", a pattern took its delimiter
                start += 1
            while end > start and text[end - 1] in _DELIMITERS:
                end -= 1
            while end < len(text) and _TOKEN_CHAR.match(text, end):
                end += 1
            if start < end and not (start and text[start - 1].isalnum()):
                found.append((start, end, kind))
    return found
