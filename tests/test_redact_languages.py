"""Secrets said in any language are found by structure: the corpora through `redact`, overall and
per language, and the pieces the structural floor is made of (the label table, answers to a
question, encoded values, recovery phrases).

The multilingual corpus was written before the structural detector; one third of each
language's lines (`secrets_multilingual_check.jsonl`) is held out and was never tuned on. A
secret counts as found when its value is gone from the output, a look-alike as kept when
nothing in it was redacted."""

from __future__ import annotations

import base64
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from dreamer.core.secrets.labels import KINDS, find_labels
from dreamer.core.secrets.redact import redact
from dreamer.core.secrets.structure import secrets_in_answer
from dreamer.core.secrets.values import made_up

DATA = Path(__file__).parent / "data"
LABELS = Path(__file__).parent.parent / "dreamer" / "core" / "secrets" / "labels.json"


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


def score(rows_: list[dict], said_of: Callable[[dict], str] = lambda r: redact(r["text"])) -> dict[str, Counter]:
    """Counts per group ("all", "lang:xx", "kind:yy"): secrets, found, look-alikes, changed;
    `said_of` gives what is kept of a row (by default its text through `redact`)."""
    out: dict[str, Counter] = {}
    for r in rows_:
        said = said_of(r)
        groups = ["all", f"lang:{r['lang']}"] + ([f"kind:{r['kind']}"] if r["secret"] else [])
        for g in groups:
            c = out.setdefault(g, Counter())
            if r["secret"]:
                c["secrets"] += 1
                c["found"] += r["secret"] not in said
            else:
                c["lookalikes"] += 1
                c["changed"] += "[REDACTED:" in said
    return out


def recall(c: Counter) -> float:
    return c["found"] / c["secrets"] if c["secrets"] else 1.0


def precision(c: Counter) -> float:
    return c["found"] / (c["found"] + c["changed"]) if c["found"] + c["changed"] else 1.0


def table(name: str, scores: dict[str, Counter]) -> str:
    lines = [f"{name}: group, recall (found/secrets), precision (look-alikes changed/look-alikes)"]
    for g in sorted(scores, key=lambda g: (g != "all", g)):
        c = scores[g]
        lines.append(
            f"  {g:<22} recall {recall(c):.3f} ({c['found']}/{c['secrets']})"
            f"  precision {precision(c):.3f} ({c['changed']}/{c['lookalikes']} changed)"
        )
    return "\n".join(lines)


@pytest.mark.parametrize("name", ["secrets_multilingual.jsonl", "secrets_corpus.jsonl"])
def test_recall_and_precision_overall_and_per_language(name):
    scores = score(rows(name))
    print("\n" + table(name, scores))
    low = {g: (recall(c), precision(c)) for g, c in scores.items() if not g.startswith("kind:")}
    assert all(r >= 0.98 and p >= 0.95 for r, p in low.values()), {
        g: v for g, v in low.items() if v[0] < 0.98 or v[1] < 0.95
    }


def test_the_held_out_third():
    """Lines never tuned on: the figure is reported per language (RELIABILITY.md), and held to
    the bar overall (a language has 4 to 6 secrets there: one miss is 0.8)."""
    scores = score(rows("secrets_multilingual_check.jsonl"))
    print("\n" + table("secrets_multilingual_check.jsonl", scores))
    assert recall(scores["all"]) >= 0.98 and precision(scores["all"]) >= 0.95


def test_the_corpus_spans_thirty_languages_and_every_kind():
    both = rows("secrets_multilingual.jsonl") + rows("secrets_multilingual_check.jsonl")
    assert len(both) >= 600 and len({r["lang"] for r in both}) >= 30
    assert {r["kind"] for r in both if r["secret"]} >= set(KINDS) - {"access"}
    assert all(r["secret"] in r["text"] for r in both if r["secret"])
    assert len({r["text"] for r in both}) == len(both)
    held = rows("secrets_multilingual_check.jsonl")
    assert 0.25 <= len(held) / len(both) <= 0.4


def test_the_label_table_has_every_kind_in_thirty_languages():
    languages = json.loads(LABELS.read_text(encoding="utf-8"))["languages"]
    full = [code for code, kinds in languages.items() if all(kinds.get(k) for k in KINDS if k != "access")]
    assert len(full) >= 30, sorted(set(languages) - set(full))


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("пароль от почты Medved#2024", "password"),
        ("contraseña del correo: Tortuga$88", "password"),
        ("wifi密码是 Lanmao2023!", "password"),
        ("비밀번호는 서랍에", None),
        ("the code review is at 4", None),
        ("hasło musi mieć co najmniej 8 znaków", None),
    ],
)
def test_labels_in_any_script(text, kind):
    found = [lab.kind for lab in find_labels(text)]
    assert (kind in found) if kind else all(k != "door_code" for k in found)


@pytest.mark.parametrize(
    ("asked", "answer", "secret"),
    [
        ("What's the Wi-Fi password?", "it's Limon.Verde7", "Limon.Verde7"),
        ("Какой PIN у карты?", "4417", "4417"),
        ("wifi密码多少？", "xiaomi8899", "xiaomi8899"),
        ("Security question: what was the name of your first pet?", "Biscuit", "Biscuit"),
    ],
)
def test_an_answer_to_a_question_that_asked_for_a_secret(asked, answer, secret):
    assert secret not in redact(answer, asked=asked)
    assert secrets_in_answer(asked, answer)


@pytest.mark.parametrize(
    ("asked", "answer"),
    [
        ("What's the Wi-Fi password?", "I don't know, ask Tom"),
        ("How was the weather?", "sunny, 24 degrees"),
        ("Can you send me the PIN?", "no, it is on a card in the drawer"),
    ],
)
def test_an_answer_without_a_secret_stays(asked, answer):
    assert redact(answer, asked=asked) == answer


def test_an_encoded_secret_is_redacted_whole():
    run = base64.b64encode(b"password: Kettle#Lamp42").decode()
    out = redact(f"config blob {run} end")
    assert run not in out and out.startswith("config blob [REDACTED:") and out.endswith(" end")
    hexed = b"api_key=Zr4kQ9pLm2VxT7bN1cWs".hex()
    assert hexed not in redact(f"value {hexed}")
    assert redact(
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
    ).startswith("data:")


def test_twelve_words_of_the_bip39_list_are_a_recovery_phrase_without_a_label():
    phrase = "legal winner thank year wave sausage worth useful legal winner thank yellow"
    assert redact(f"keep this safe: {phrase}") == "keep this safe: [REDACTED:seed_phrase]"
    assert redact("we agree to meet again in april at the airport") == "we agree to meet again in april at the airport"


@pytest.mark.parametrize(
    "text",
    [
        "pass(1 %) / pass(100 %): {'10000': 0.0149, '100000': 0.02}",
        "the pass table on 2026-11-30 from a fresh clone",
        "the mean of the last layer's token states over the mask, L2-normalised.",
        "--depends-on unit:LegacyTable, the test passed",
        "readers call `POST /v1/team/recall` with their token",
        '"tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"',
        'r"antwort\\s+auf\\s+(?:die|meine)\\s+sicherheitsfrage",',
        "the password field is validated with [A-Za-z0-9]{8,}",
    ],
)
def test_technical_text_near_a_label_stays(text):
    assert redact(text) == text


@pytest.mark.parametrize(
    ("value", "made"),
    [
        ("Ostra$Pedra19", True),
        ("Жёлудь#42Лес", True),
        ("Python3.11", False),  # a version: its symbol joins
        ("iPhone15-Pro", False),
        ("@Marta2024!", False),  # a mention
        ("#LaunchDay2025!", False),  # a tag
        ("aGVsbG8gV29ybGQ5OQ==", False),  # base64 ("hello World99"): read decoded instead
        ("kettle#lamp42", False),  # one case only
    ],
)
def test_a_password_by_shape_alone(value, made):
    assert made_up(value) is made
    assert (value not in redact(f"notes: {value} ok")) is made


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("código de verificação: 204 771", "204 771"),
        ("the app shows 318 006 as the sign-in code", None),
        ("308 115 is the verification code", "308 115"),
        ("PIN kartu saya 2047", "2047"),  # a PIN shaped like a far year
        ("kode kartu diganti tahun 2019", None),
    ],
)
def test_digit_groups_and_years_near_a_label(text, secret):
    out = redact(text)
    if secret:
        assert secret not in out and "[REDACTED:" in out
    else:
        assert out == text


@pytest.mark.parametrize(
    "text",
    [
        "we renamed the sheet R&D-Budget2025 last week",
        "the branch is feature/Login#42-fix",
        "tag v2.3.1-RC!Final broke the build",
        "T-Shirt#Size12 sold out",
    ],
)
def test_technical_names_are_no_password_by_shape(text):
    assert redact(text) == text
