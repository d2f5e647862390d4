"""Planted secrets for the reliability suite: at least 50 formats, each in the place it is
usually pasted (prose, env files, config files, tool output, URLs, headers).

Values are generated from fixed seeds, so no real-looking credential is written here.
"""

from __future__ import annotations

import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits
DIGITS = string.digits


def rnd(seed: str, n: int, alphabet: str = ALNUM) -> str:
    """`n` deterministic random characters; a digit is mixed in when the alphabet has one."""
    r = random.Random(f"reliability:{seed}")
    body = "".join(r.choice(alphabet) for _ in range(n - 1))
    last = r.choice(DIGITS) if any(c in alphabet for c in DIGITS) else r.choice(alphabet)
    return body + last


def luhn_card(prefix: str, length: int, seed: str) -> str:
    r = random.Random(seed)
    body = prefix + "".join(r.choice(DIGITS) for _ in range(length - len(prefix) - 1))
    for last in DIGITS:
        digits = body + last
        total = 0
        for i, ch in enumerate(reversed(digits)):
            d = int(ch)
            if i % 2 == 1:
                d = d * 2 - 9 if d > 4 else d * 2
            total += d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def pem(label: str, seed: str, lines: int = 6) -> str:
    body = "\n".join(rnd(f"{seed}{i}", 64, B64) for i in range(lines))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def grouped(digits: str, sep: str, groups: tuple[int, ...]) -> str:
    out, pos = [], 0
    for g in groups:
        out.append(digits[pos : pos + g])
        pos += g
    return sep.join(out)


@dataclass(frozen=True)
class Planted:
    """One secret format: where it sits (`text`), and the part that must never leave (`secret`)."""

    name: str
    text: str
    secret: str
    place: str  # chat | tool | file


def _c(s: str) -> str:
    return s  # keeps prefixes visibly split below, so scanners do not flag this file


P: list[Planted] = []


def plant(name: str, place: str, template: str, secret: str) -> None:
    P.append(Planted(name, template.format(s=secret), secret, place))


# --- cloud providers --------------------------------------------------------------------
plant("aws_access_key_id", "chat", "my access key is {s} for the staging account", _c("AKIA") + rnd("aws1", 16, UPPER))
plant(
    "aws_temp_key_id",
    "tool",
    '{{\n  "AccessKeyId": "{s}",\n  "Expiration": "2030-01-01"\n}}',
    _c("ASIA") + rnd("aws2", 16, UPPER),
)
plant("aws_secret_key", "file", "[default]\naws_secret_access_key = {s}\nregion = eu-west-1\n", rnd("aws3", 40, B64))
plant("aws_session_token", "file", "[default]\naws_session_token = {s}\n", rnd("aws4", 180, B64))
plant("terraform_secret_key", "file", 'provider "aws" {{\n  secret_key = "{s}"\n}}\n', rnd("aws5", 40, B64))
plant("gcp_api_key", "chat", "the maps key {s} keeps getting rate limited", _c("AIza") + rnd("gcp1", 35, B64URL))
plant(
    "gcp_service_account",
    "file",
    '{{"type": "service_account", "private_key": "{s}"}}',
    pem("PRIVATE KEY", "gcp2").replace("\n", "\\n"),
)
plant("google_oauth_secret", "file", "GOOGLE_CLIENT_SECRET={s}\n", _c("GOCSPX-") + rnd("gcp3", 28, B64URL))
plant(
    "azure_storage_key",
    "file",
    "DefaultEndpointsProtocol=https;AccountName=a;AccountKey={s};EndpointSuffix=core.windows.net",
    rnd("az1", 86, B64) + "==",
)
plant(
    "azure_sas",
    "tool",
    "GET https://a.blob.core.windows.net/c/x?sv=2022-11-02&sp=r&sig={s} 200",
    rnd("az2", 43) + "%3D",
)
plant("azure_client_secret", "file", "AZURE_CLIENT_SECRET={s}\n", rnd("az3", 8) + "~" + rnd("az4", 31, B64URL))
plant("digitalocean_token", "chat", "doctl auth init -t {s}", _c("dop_v1_") + rnd("do", 64, HEX))
plant(
    "heroku_api_key",
    "file",
    "HEROKU_API_KEY={s}\n",
    "a1b2c3d4-" + rnd("hk", 4, HEX) + "-4f5e-9a8b-" + rnd("hk2", 12, HEX),
)
plant("cloudflare_token", "file", "CF_API_TOKEN={s}\n", rnd("cf", 40, B64URL))
# --- code hosts, registries, CI ----------------------------------------------------------
plant("github_pat_classic", "chat", "use {s} to push the tag", _c("ghp_") + rnd("gh1", 36))
plant(
    "github_fine_grained",
    "tool",
    "remote: token {s} lacks scope",
    _c("github_pat_") + rnd("gh2", 22) + "_" + rnd("gh3", 59),
)
plant("github_app_token", "file", "GITHUB_TOKEN={s}\n", _c("ghs_") + rnd("gh4", 36))
plant("gitlab_pat", "chat", "my gitlab token {s} expired", _c("glpat-") + rnd("gl", 20, B64URL))
plant("npm_token", "file", "//registry.npmjs.org/:_authToken={s}\n", _c("npm_") + rnd("npm", 36))
plant(
    "pypi_token",
    "file",
    "[pypi]\n  username = __token__\n  password = {s}\n",
    _c("pypi-AgEIcHlwaS5vcmc") + rnd("pypi", 70, B64URL),
)
plant(
    "docker_auth",
    "file",
    '{{"auths": {{"registry.example.com": {{"auth": "{s}"}}}}}}',
    "ZGVwbG95OmQwY2tlci1QYXNz" + rnd("dk", 12, B64) + "=",
)
plant("huggingface_token", "chat", "huggingface token {s}", _c("hf_") + rnd("hf", 34))
plant("vault_token", "tool", "Key  Value\ntoken  {s}\ntoken_duration  768h", _c("hvs.") + rnd("vault", 90, B64URL))
plant("netrc_password", "file", "machine api.example.com\n  login deploy\n  password {s}\n", rnd("netrc", 18))
# --- SaaS API keys -----------------------------------------------------------------------
plant("openai_key", "chat", "I prefer keeping {s} in my shell profile", _c("sk-proj-") + rnd("oa", 74, B64URL))
plant("anthropic_key", "file", "ANTHROPIC_API_KEY={s}\n", _c("sk-ant-api03-") + rnd("an", 93, B64URL))
plant(
    "slack_bot_token",
    "file",
    "SLACK_BOT_TOKEN={s}\n",
    _c("xoxb-") + rnd("sl1", 12, DIGITS) + "-" + rnd("sl2", 13, DIGITS) + "-" + rnd("sl3", 24),
)
plant(
    "slack_webhook",
    "chat",
    "post alerts to https://hooks.slack.com/services/{s}",
    "T" + rnd("sw1", 8, UPPER) + "/B" + rnd("sw2", 10, UPPER) + "/" + rnd("sw3", 24),
)
plant(
    "discord_webhook", "chat", "webhook https://discord.com/api/webhooks/123456789012345678/{s}", rnd("dw", 68, B64URL)
)
plant(
    "telegram_bot_token",
    "chat",
    "bot token {s} for the alerts bot",
    rnd("tg1", 10, DIGITS) + ":AA" + rnd("tg2", 33, B64URL),
)
plant("stripe_live_key", "chat", "charge it with {s}", _c("sk_live_") + rnd("st1", 24))
plant("stripe_webhook_secret", "file", "STRIPE_WEBHOOK_SECRET={s}\n", _c("whsec_") + rnd("st2", 32))
plant("sendgrid_key", "tool", "Using API key {s}", _c("SG.") + rnd("sg1", 22, B64URL) + "." + rnd("sg2", 43, B64URL))
plant("twilio_api_key", "chat", "twilio key {s}", _c("SK") + rnd("tw", 32, HEX))
plant("mailgun_key", "chat", "the mailgun key is {s}", _c("key-") + rnd("mg", 32, HEX))
plant("shopify_token", "chat", "shopify admin token {s}", _c("shpat_") + rnd("sh", 32, HEX))
plant("datadog_api_key", "file", "DD_API_KEY={s}\n", rnd("dd", 32, HEX))
plant("linear_api_key", "chat", "linear key {s}", _c("lin_api_") + rnd("lin", 40))
plant("postman_key", "chat", "postman {s}", _c("PMAK-") + rnd("pm1", 24, HEX) + "-" + rnd("pm2", 34, HEX))
plant("databricks_token", "file", "DATABRICKS_TOKEN={s}\n", _c("dapi") + rnd("db", 32, HEX))
# --- private key blocks ------------------------------------------------------------------
plant("rsa_private_key", "chat", "here is the deploy key:\n{s}\nthanks", pem("RSA PRIVATE KEY", "rsa"))
plant("openssh_private_key", "tool", "$ cat ~/.ssh/id_ed25519\n{s}\n", pem("OPENSSH PRIVATE KEY", "ssh"))
plant("ec_private_key", "file", "{s}\n", pem("EC PRIVATE KEY", "ec"))
plant("pgp_private_key", "file", "{s}\n", pem("PGP PRIVATE KEY BLOCK", "pgp"))
plant("encrypted_private_key", "file", "{s}\n", pem("ENCRYPTED PRIVATE KEY", "enc"))
# --- passwords in URLs and assignments ------------------------------------------------------
plant("postgres_url", "file", "DATABASE_URL=postgresql://app:{s}@db.internal:5432/app\n", "Pg" + rnd("pg", 14))
plant("redis_url", "tool", "connecting to redis://:{s}@cache:6379/0", "Rd" + rnd("rd", 16))
plant("mongodb_url", "chat", "my cluster is mongodb+srv://admin:{s}@cluster0.example.net/db", "Mg" + rnd("mgu", 12))
plant("amqp_url", "file", "BROKER=amqp://worker:{s}@rabbit:5672//\n", "Aq" + rnd("aq", 12))
plant(
    "https_basic_url",
    "tool",
    "fatal: could not read from https://deploy:{s}@git.example.com/repo.git",
    "Gt" + rnd("gt", 14),
)
plant("env_password", "file", "DB_HOST=db\nDB_PASSWORD={s}\nDB_PORT=5432\n", "Pw" + rnd("envpw", 12) + "#!")
plant("yaml_password", "file", "database:\n  user: app\n  password: {s}\n", "Ym" + rnd("ympw", 14))
plant("json_password", "tool", '{{"user": "bob", "password": "{s}"}}', "Js" + rnd("jspw", 14))
plant("cli_password_flag", "chat", "I always run mysql -u root --password {s} -h db", "Cl" + rnd("clpw", 12))
plant("pgpassword_env", "chat", "PGPASSWORD={s} psql -h db -U app", "Pp" + rnd("pgenv", 12))
plant("dotnet_connection", "file", "Server=db;Database=app;User Id=sa;Password={s};\n", "Dn" + rnd("dn", 14))
plant("jdbc_password", "file", "url=jdbc:mysql://db:3306/app?user=app&password={s}\n", "Jd" + rnd("jd", 14))
plant("python_secret_assign", "file", 'SECRET_KEY = "{s}"\n', rnd("dj", 50, ALNUM + "!@#$%^&*(-_=+)"))
plant("sshpass", "chat", "I use sshpass -p {s} ssh root@box", "Ss" + rnd("sshp", 12))
plant("curl_user_password", "tool", "$ curl -u admin:{s} https://api.example.com/v1", "Cu" + rnd("cup", 14))
# --- tokens in headers, JWTs ---------------------------------------------------------------
plant("bearer_header", "tool", "> GET /v1/me\n> Authorization: Bearer {s}\n< 200 OK", rnd("br", 40, B64URL))
plant("basic_header", "tool", "Authorization: Basic {s}\r\nHost: api", "YWRtaW46" + rnd("bh", 20, B64) + "=")
plant(
    "jwt",
    "chat",
    "the session cookie was {s} and it expired",
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + rnd("jw1", 40, B64URL) + "." + rnd("jw2", 43, B64URL),
)
plant("okta_ssws", "tool", "Authorization: SSWS {s}", "00" + rnd("okta", 40, B64URL))
plant("cookie_session", "tool", "Set-Cookie: session={s}; HttpOnly", rnd("ck", 48, B64URL))
# --- cards ---------------------------------------------------------------------------------
plant("visa", "chat", "charge my card {s} exp 12/29", grouped(luhn_card("4", 16, "visa"), " ", (4, 4, 4, 4)))
plant("mastercard", "chat", "card: {s}", grouped(luhn_card("55", 16, "mc"), "-", (4, 4, 4, 4)))
plant("amex", "tool", '{{"pan": "{s}"}}', luhn_card("37", 15, "amex"))
plant("discover", "chat", "the discover card is {s}", luhn_card("6011", 16, "disc"))


# --- said in prose, and personal numbers ----------------------------------------------------
def iban(country: str, bban: str) -> str:
    """A valid IBAN of `country` with `bban`: its two check digits computed (mod 97)."""
    moved = bban + country + "00"
    check = 98 - int("".join(str(int(ch, 36)) for ch in moved)) % 97
    return f"{country}{check:02d}{bban}"


PROSE_START = len(P)
plant("prose_password", "chat", "my password is {s} so keep it safe", "Hn" + rnd("pp1", 8))
plant("prose_password_for", "chat", "the password for the router is {s}", "Rt" + rnd("pp2", 9) + "!")
plant("prose_password_word", "chat", "My password is {s}.", "swordfishmarlin")
plant("prose_password_changed", "chat", "I changed my password to {s} yesterday", "Kt#" + rnd("pp3", 10))
plant("prose_passphrase", "chat", "passphrase: {s}", "correct horse battery staple")
plant("prose_passphrase_quoted", "chat", 'the gpg passphrase is "{s}"', "tiny green frogs sing loudly")
plant("prose_pin", "chat", "my PIN is {s}, don't tell anyone", rnd("pin1", 6, DIGITS))
plant("prose_pin_alarm", "chat", "The pin for the alarm is {s}.", rnd("pin2", 8, DIGITS))
plant("prose_ssn", "chat", "my SSN is {s}", "078-05-" + rnd("ssn", 4, "123456789"))
plant("prose_ssn_spaced", "chat", "Social security number: {s}", "219 09 " + rnd("ssn2", 4, "123456789"))
plant(
    "prose_iban",
    "chat",
    "send the refund to {s} please",
    grouped(iban("GB", "WEST" + rnd("ib1", 14, DIGITS)), " ", (4,) * 5 + (2,)),
)
plant("prose_iban_compact", "chat", "my IBAN is {s}", iban("DE", rnd("ib2", 18, DIGITS)))
plant(
    "prose_phone",
    "chat",
    "my phone number is {s}",
    "+47 9" + rnd("ph1", 2, DIGITS) + " " + rnd("ph2", 2, DIGITS) + " " + rnd("ph3", 3, DIGITS),
)
plant("prose_phone_call", "chat", "call me at {s} after six", "(415) 555-" + rnd("ph4", 4, DIGITS))

PLANTED: tuple[Planted, ...] = tuple(P)
PROSE: tuple[Planted, ...] = tuple(P[PROSE_START:])

CORPUS_PATH = Path(__file__).parent.parent / "data" / "secrets_corpus.jsonl"
CORPUS = [json.loads(line) for line in CORPUS_PATH.read_text(encoding="utf-8").splitlines() if line.strip()]
POSITIVES = [r for r in CORPUS if r["secret"]]  # secrets said in words (`test_secrets_said`)
NEGATIVES = [r for r in CORPUS if not r["secret"]]  # look-alikes that must stay
