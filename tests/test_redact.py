"""Secrets are removed from prose, JSON, env files, tool output and URLs; the rest is untouched."""

from __future__ import annotations

import random
import string

import pytest

from dreamer.core.secrets.redact import (
    MEMORY_BLOCK_RE,
    clean_for_model,
    find_secrets,
    redact,
    strip_injected,
)
from dreamer.core.secrets.rules import RULES, luhn_ok

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits


def rnd(seed: str, n: int, alphabet: str = ALNUM) -> str:
    """Deterministic random characters, so no real-looking token is written in this file.

    Always mixes in a digit, as real tokens nearly always have one.
    """
    r = random.Random(seed)
    body = "".join(r.choice(alphabet) for _ in range(n - 1))
    return body + r.choice(string.digits) if any(c in alphabet for c in string.digits) else body + r.choice(alphabet)


def j(*parts: str) -> str:
    return "".join(parts)


def _pem(label: str, seed: str) -> str:
    body = "\n".join(rnd(f"{seed}{i}", 64, B64) for i in range(4))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _card(prefix: str, length: int) -> str:
    """A number with the given prefix that passes the Luhn check."""
    body = prefix + "1" * (length - len(prefix) - 1)
    for last in string.digits:
        if luhn_ok(body + last):
            return body + last
    raise AssertionError("unreachable")


def _spaced(digits: str, sep: str, groups: tuple[int, ...]) -> str:
    out, pos = [], 0
    for g in groups:
        out.append(digits[pos : pos + g])
        pos += g
    return sep.join(out)


OPENAI = j("sk-", rnd("oa", 48))
OPENAI_PROJ = j("sk-", "proj-", rnd("oap", 74, B64URL))
OPENAI_SVC = j("sk-", "svcacct-", rnd("oas", 60, B64URL))
ANTHROPIC = j("sk-", "ant-", "api03-", rnd("an", 93, B64URL), "AA")
ANTHROPIC_2 = j("sk-", "ant-", "admin01-", rnd("an2", 80, B64URL))
AWS_ID = j("AKIA", rnd("aws", 16, UPPER))
AWS_ID_2 = j("ASIA", rnd("aws2", 16, UPPER))
AWS_SECRET = rnd("awss", 40, B64)
AWS_SECRET_2 = rnd("awss2", 40, B64)
GH = {p: j(p, "_", rnd(p, 36)) for p in ("ghp", "gho", "ghu", "ghs", "ghr")}
GH_PAT = j("github_", "pat_", rnd("pat1", 22), "_", rnd("pat2", 59))
GITLAB = j("glpat", "-", rnd("gl", 20, B64URL))
SLACK_BOT = j("xoxb", "-", rnd("sb1", 12, string.digits), "-", rnd("sb2", 13, string.digits), "-", rnd("sb3", 24))
SLACK_USER = j("xoxp", "-", rnd("su1", 12, string.digits), "-", rnd("su2", 12, string.digits), "-", rnd("su3", 32, HEX))
SLACK_APP = j("xapp", "-1-", rnd("sa1", 11, UPPER), "-", rnd("sa2", 13, string.digits), "-", rnd("sa3", 64, HEX))
SLACK_HOOK_PATH = j("T", rnd("sh1", 8, UPPER), "/B", rnd("sh2", 10, UPPER), "/", rnd("sh3", 24))
STRIPE_LIVE = j("sk", "_live_", rnd("st", 24))
STRIPE_RESTRICTED = j("rk", "_live_", rnd("rk", 24))
STRIPE_WEBHOOK = j("whsec", "_", rnd("wh", 32))
GOOGLE = j("AIza", rnd("gg", 35, B64URL))
GOOGLE_OAUTH = j("GOCSPX", "-", rnd("gx", 28, B64URL))
TWILIO = j("SK", rnd("tw", 32, HEX))
SENDGRID = j("SG", ".", rnd("sg1", 22, B64URL), ".", rnd("sg2", 43, B64URL))
NPM = j("npm", "_", rnd("npm", 36))
PYPI = j("pypi", "-AgEIcHlwaS5vcmc", rnd("py", 80, B64URL))
HF = j("hf", "_", rnd("hf", 34))
JWT = j("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9", ".", "eyJ", rnd("jw1", 40, B64URL), ".", rnd("jw2", 43, B64URL))
PEM_RSA = _pem("RSA PRIVATE KEY", "rsa")
PEM_OPENSSH = _pem("OPENSSH PRIVATE KEY", "ssh")
PEM_EC = _pem("EC PRIVATE KEY", "ec")
PEM_PGP = _pem("PGP PRIVATE KEY BLOCK", "pgp")
PEM_PKCS8 = _pem("PRIVATE KEY", "p8")
AZURE_KEY = rnd("az", 86, B64) + "=="
AZURE_SIG = rnd("sas", 43, ALNUM) + "%3D"
VISA = _card("4", 16)
MASTERCARD = _card("53", 16)
AMEX = _card("37", 15)
HIGH_ENTROPY = rnd("he", 40)
BEARER = rnd("br", 40, B64URL)
BASIC = "dXNlcjpjb3JyZWN0LWhvcnNlLWJhdHRlcnk="

# (expected kind, text, secret that must disappear)
CORPUS: list[tuple[str, str, str]] = [
    # --- provider keys in prose, env files, JSON and tool output ---
    ("openai_key", f"My key is {OPENAI}, please use it.", OPENAI),
    ("openai_key", f"OPENAI_API_KEY={OPENAI_PROJ}\nOTHER=1", OPENAI_PROJ),
    ("openai_key", f'{{"name": "svc", "key": "{OPENAI_SVC}"}}', OPENAI_SVC),
    ("anthropic_key", f"export ANTHROPIC_API_KEY='{ANTHROPIC}'", ANTHROPIC),
    ("anthropic_key", f'headers = {{"x-api-key": "{ANTHROPIC_2}", "anthropic-version": "2023-06-01"}}', ANTHROPIC_2),
    ("aws_access_key_id", f"[default]\naws_access_key_id = {AWS_ID}\nregion = us-east-1", AWS_ID),
    ("aws_access_key_id", f"$ aws sts get-caller-identity\nAccessKeyId: {AWS_ID_2}\n", AWS_ID_2),
    ("aws_secret_key", f"[default]\naws_secret_access_key = {AWS_SECRET}\n", AWS_SECRET),
    ("aws_secret_key", f"export AWS_SECRET_ACCESS_KEY={AWS_SECRET_2}", AWS_SECRET_2),
    ("github_token", f"Use {GH['ghp']} for the push.", GH["ghp"]),
    ("github_token", f'{{"access_token": "{GH["gho"]}", "scope": "repo"}}', GH["gho"]),
    ("github_token", f"tool output: token={GH['ghu']} expires in 8h", GH["ghu"]),
    ("github_token", f"GITHUB_TOKEN={GH['ghs']}", GH["ghs"]),
    ("github_token", f"refresh with {GH['ghr']}", GH["ghr"]),
    ("github_token", f"fine-grained: {GH_PAT}", GH_PAT),
    ("gitlab_token", f"git remote set-url origin https://oauth2:{GITLAB}@gitlab.com/g/p.git", GITLAB),
    ("slack_token", f"SLACK_BOT_TOKEN={SLACK_BOT}", SLACK_BOT),
    ("slack_token", f"the user token {SLACK_USER} was pasted", SLACK_USER),
    ("slack_token", f'{{"app_token": "{SLACK_APP}"}}', SLACK_APP),
    ("slack_webhook", f"curl -X POST https://hooks.slack.com/services/{SLACK_HOOK_PATH} -d '{{}}'", SLACK_HOOK_PATH),
    ("stripe_key", f"stripe.api_key = '{STRIPE_LIVE}'", STRIPE_LIVE),
    ("stripe_key", f"Restricted key: {STRIPE_RESTRICTED}", STRIPE_RESTRICTED),
    ("stripe_key", f"STRIPE_WEBHOOK_SECRET={STRIPE_WEBHOOK}", STRIPE_WEBHOOK),
    ("google_api_key", f"https://maps.googleapis.com/maps/api/geocode/json?address=x&key={GOOGLE}", GOOGLE),
    (
        "google_oauth_secret",
        f'{{"installed": {{"client_id": "1.apps", "client_secret": "{GOOGLE_OAUTH}"}}}}',
        GOOGLE_OAUTH,
    ),
    ("twilio_key", f"Twilio API key sid {TWILIO} created", TWILIO),
    ("sendgrid_key", f"SENDGRID_API_KEY={SENDGRID}", SENDGRID),
    ("npm_token", f"//registry.npmjs.org/:_authToken={NPM}", NPM),
    ("pypi_token", f"[pypi]\nusername = __token__\npassword = {PYPI}\n", PYPI),
    ("huggingface_token", f"huggingface-cli login --token {HF}", HF),
    ("jwt", f"The session cookie was {JWT}; it expired.", JWT),
    # --- private keys ---
    ("private_key", f"Here is the deploy key:\n{PEM_RSA}\nthanks", PEM_RSA),
    ("private_key", f"$ cat ~/.ssh/id_ed25519\n{PEM_OPENSSH}\n$ ", PEM_OPENSSH),
    ("private_key", f"ec key:\n{PEM_EC}", PEM_EC),
    ("private_key", f"{PEM_PGP}\n", PEM_PGP),
    (
        "private_key",
        '{"type": "service_account", "private_key": "' + PEM_PKCS8.replace("\n", "\\n") + '\\n"}',
        PEM_PKCS8.replace("\n", "\\n"),
    ),
    # --- passwords in URLs ---
    ("url_password", "DATABASE_URL=postgresql://admin:Tr0ub4dor&3@db.internal:5432/app", "Tr0ub4dor&3"),
    ("url_password", "connecting to redis://:s3cretRedisPw@cache:6379/0 ...", "s3cretRedisPw"),
    ("url_password", "amqp://worker:Wk-pass-9931@rabbit.local:5672//", "Wk-pass-9931"),
    ("url_password", "mongodb+srv://app:p%40ssw0rd!@cluster0.example.net/db", "p%40ssw0rd!"),
    # --- assignments ---
    ("password", "password=hunter2x", "hunter2x"),
    ("password", "db:\n  host: db\n  passwd: Sup3r-S3cret\n", "Sup3r-S3cret"),
    ("secret", 'secret = "correct horse battery staple"', "correct horse battery staple"),
    ("api_key", "service:\n  api_key: 9f8e7d6c5b4a39281706\n", "9f8e7d6c5b4a39281706"),
    ("token", "curl 'https://api.example.com/v1/items?token=tk_4f9a8b7c6d5e&limit=5'", "tk_4f9a8b7c6d5e"),
    ("secret", 'CLIENT_SECRET="Zx9-Qw8-Er7-Ty6"', "Zx9-Qw8-Er7-Ty6"),
    ("password", "# .env\nDB_HOST=localhost\nDB_PASSWORD=kX7#mQ2!vL9\nDB_PORT=5432\n", "kX7#mQ2!vL9"),
    ("password", '{"user": "bob", "password": "bobs-Secret-99"}', "bobs-Secret-99"),
    ("password", '{\\"user\\": \\"bob\\", \\"password\\": \\"esc4ped-Pw\\"}', "esc4ped-Pw"),
    ("password", 'class Settings(BaseSettings):\n    password: str = "pydantic-Pw-1"\n', "pydantic-Pw-1"),
    ("password", "mysql -u root --password 'Cl1-pw-here' -h db", "Cl1-pw-here"),
    ("password", "psql --password=PgPw_2024 -U app", "PgPw_2024"),
    ("api_key", "<config><apiKey>xml-key-0042</apiKey></config>", "xml-key-0042"),
    ("token", "token: hunter2hunter2", "hunter2hunter2"),
    # --- authorization headers ---
    ("authorization", f"curl -H 'Authorization: Bearer {BEARER}' https://api.example.com", BEARER),
    ("authorization", f"Authorization: Basic {BASIC}\r\nHost: x", BASIC),
    ("authorization", f'{{"headers": {{"Authorization": "token {BEARER}"}}}}', BEARER),
    # --- cards, Azure, generic ---
    ("credit_card", f"Charge card {_spaced(VISA, ' ', (4, 4, 4, 4))} exp 12/29.", _spaced(VISA, " ", (4, 4, 4, 4))),
    ("credit_card", f"card: {_spaced(MASTERCARD, '-', (4, 4, 4, 4))}", _spaced(MASTERCARD, "-", (4, 4, 4, 4))),
    ("credit_card", f'{{"pan": "{AMEX}"}}', AMEX),
    (
        "azure_storage_key",
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        AZURE_KEY,
    ),
    (
        "azure_sas",
        f"https://acct.blob.core.windows.net/c/b?sv=2022-11-02&se=2030-01-01&sp=r&sig={AZURE_SIG}",
        AZURE_SIG,
    ),
    ("high_entropy", f'SESSION_SIGNING_SALT = "{HIGH_ENTROPY}"', HIGH_ENTROPY),
    ("high_entropy", f"cookie_key={HIGH_ENTROPY[::-1]}", HIGH_ENTROPY[::-1]),
]


def test_a_rule_that_needs_characters_cannot_match_without_them():
    gated = [rule for rule in RULES if rule.needs]
    assert [rule.needs for rule in gated] == [":=", ":="]  # the key = value and key: value rules
    texts = [text for _, text, _ in CORPUS] + NON_SECRETS + ["password hunter2", "api_key sk-abc123def456 token x"]
    for rule in gated:
        for text in texts:
            bare = "".join(" " if ch in rule.needs else ch for ch in text)
            assert not rule.may_match(bare)
            assert rule.pattern.search(bare) is None, (rule.needs, bare)
        assert rule.may_match("a=b") and rule.may_match("a: b")


def test_corpus_is_large_enough():
    assert len(CORPUS) >= 50
    assert len({kind for kind, _, _ in CORPUS}) >= 25


@pytest.mark.parametrize(("kind", "text", "secret"), CORPUS, ids=[f"{i:02d}-{c[0]}" for i, c in enumerate(CORPUS)])
def test_secret_is_removed(kind, text, secret):
    assert secret in text
    out = redact(text)
    assert secret not in out
    assert f"[REDACTED:{kind}]" in out
    assert redact(out) == out  # idempotent


@pytest.mark.parametrize(("kind", "text", "secret"), CORPUS, ids=[f"{i:02d}-{c[0]}" for i, c in enumerate(CORPUS)])
def test_find_secrets_reports_the_secret(kind, text, secret):
    found = find_secrets(text)
    start = text.index(secret)
    assert any(k == kind and s <= start and start + len(secret) <= e for k, s, e in found), found


def test_all_secrets_in_one_transcript():
    text = "\n---\n".join(t for _, t, _ in CORPUS)
    out = redact(text)
    for _, _, secret in CORPUS:
        assert secret not in out
    spans = find_secrets(text)
    assert spans == sorted(spans, key=lambda s: s[1])
    assert all(a[2] <= b[1] for a, b in zip(spans, spans[1:]))


def test_context_around_secret_is_kept():
    assert redact("password=hunter2x # dev") == "password=[REDACTED:password] # dev"
    assert (
        redact("postgresql://admin:Tr0ub4dor@db.internal:5432/app")
        == "postgresql://admin:[REDACTED:url_password]@db.internal:5432/app"
    )
    assert redact('{"password": "x1y2z3", "user": "bob"}') == '{"password": "[REDACTED:password]", "user": "bob"}'
    assert redact(f"Authorization: Bearer {BEARER}") == "Authorization: Bearer [REDACTED:authorization]"
    assert redact(f"key {OPENAI} end") == "key [REDACTED:openai_key] end"
    assert redact(f"a\n{PEM_RSA}\nb") == "a\n[REDACTED:private_key]\nb"
    assert (
        redact(f"git clone https://x-access-token:{GH['ghs']}@github.com/o/r.git")
        == "git clone https://x-access-token:[REDACTED:github_token]@github.com/o/r.git"
    )


def test_unclosed_private_key_is_removed_to_the_end():
    text = "start\n-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\nabc"
    assert redact(text) == "start\n[REDACTED:private_key]"


NON_SECRETS = [
    "We decided to keep the retry budget at three attempts per session.",
    "commit 3f2a9c1 fixed the flaky test; see 3f2a9c1e8b7d6a5f4e3d2c1b0a9f8e7d6c5b4a39 for the parent.",
    "request 550e8400-e29b-41d4-a716-446655440000 finished in 120 ms",
    'session_id = "550e8400-e29b-41d4-a716-446655440000"',
    "Upgrade from 1.2.3 to v2.10.0-rc1 (python 3.11.7, numpy>=1.26).",
    "client = OpenAI(api_key=api_key, base_url=settings.llm_base_url)",
    'password = os.environ["DB_PASSWORD"]',
    'token = os.getenv("GITHUB_TOKEN")',
    "api_key=settings.llm_api_key",
    'llm_api_key: str = "none"',
    'qdrant_api_key: str = ""',
    "password: str",
    "DB_PASSWORD=${DB_PASSWORD}",
    "API_KEY=<your-api-key>",
    "password = ?",
    "max_tokens=1000, prompt_tokens=523, token_count = 42",
    "password_hash = bcrypt.hashpw(pw, salt)",
    "The secret: always test first.",
    "The password reset flow sends an email with a one-time link.",
    "Use a bearer token in the Authorization header; basic information is in the README.",
    "bearer authentication-mechanisms are documented",
    "https://example.com:8080/path?q=1&page=2",
    "git@github.com:org/repo.git and ssh://git@example.com/repo",
    "Contact alice@example.com or call +1 415 555 2671.",
    "order 4111-1111-1111-1112 failed (not a valid card number)",
    "epoch millis 1700000000000 and 20240101123045",
    "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "scikit-learn, sk-learn alias and task-ant-colony are package names",
    "def get_token(self) -> str:\n    return self._token\n",
    "if password == confirm:\n    ok = True",
    "showPassword=false, isSecret = true",
    "see https://docs.python.org/3/library/re.html#re.Match",
    "AKIA is the prefix of AWS access key ids; ghp_ marks GitHub tokens.",
    "[REDACTED:password] stays as it is",
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==",
    'cache_key = "user:42:prefs"',
    'session_key = "user_42_preferences_cache"',
    "primary_key=True, sort_key=name",
    "",
]


@pytest.mark.parametrize("text", NON_SECRETS)
def test_non_secrets_are_unchanged(text):
    assert redact(text) == text
    assert find_secrets(text) == []


# --- injected blocks ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a <memory-context>x</memory-context> b", "a  b"),
        ("<memory-context source=\"recall\" k='3'>\nline 1\nline 2\n</memory-context>\nHello", "\nHello"),
        ("<Memory-Context>x</MEMORY-CONTEXT >after", "after"),
        ("1<memory-context>a</memory-context>2<memory-context>b</memory-context>3", "123"),
        ("a<memory-context>1<memory-context>2</memory-context>3</memory-context>b", "ab"),
        ("keep <memory-context>rest\nof the text", "keep "),
        ("x<memory-context>a</memory-context>y<memory-context type=z>unclosed", "xy"),
        ("a<memory-context>1<memory-context>2</memory-context>3", "a"),
        ("q <recalled-memories>\n- likes tea\n</recalled-memories> r", "q  r"),
        ("<recalled-memories>a<memory-context>b</memory-context>c</recalled-memories>d", "d"),
        ("<memory-context>a<recalled-memories>b</recalled-memories>c</memory-context>d", "d"),
        ("stray </memory-context> close", "stray  close"),
        ("empty <memory-context/> tag", "empty  tag"),
        ("<memory-contextual>is not ours</memory-contextual>", "<memory-contextual>is not ours</memory-contextual>"),
        ("no blocks <b>here</b>", "no blocks <b>here</b>"),
        ("cut <memory-context attr", "cut "),
        ("", ""),
    ],
)
def test_strip_injected(text, expected):
    assert strip_injected(text) == expected


def test_memory_block_re_finds_blocks():
    assert MEMORY_BLOCK_RE.search("x <MEMORY-CONTEXT a=1>y</memory-context>")
    assert MEMORY_BLOCK_RE.search("x <recalled-memories>y")
    assert not MEMORY_BLOCK_RE.search("x <memory-contexts>y</memory-contexts>")
    m = MEMORY_BLOCK_RE.search("a<memory-context>b</memory-context>c")
    assert m and m.group(0) == "<memory-context>b</memory-context>"


def test_clean_for_model_strips_then_redacts():
    text = f"<memory-context>old {OPENAI}</memory-context>Now use {GH['ghp']} please"
    assert clean_for_model(text) == "Now use [REDACTED:github_token] please"


def test_large_input_is_read_to_its_end():
    """Half a megabyte of runs that would make a backtracking pattern explode is read whole (its
    speed is a benchmark's, never a test's: `dreamer bench`)."""
    blob = "".join(random.Random(1).choice(B64) for _ in range(200_000))
    text = ("-" * 50_000) + blob + ("a-" * 50_000) + ("password=" * 10_000)
    out = redact(text)
    assert out.startswith("-" * 50_000) and out.endswith("a-password=[REDACTED:password]")
    assert strip_injected("<memory-context>" * 5_000 + text) == ""  # an unclosed block is cut to the end
