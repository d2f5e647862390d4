"""The second held-out sets through the one gate every writer asks (`admit`; an answer to an
earlier message through `admit_ledger` with that message).

`tests/data/secrets_fresh2.jsonl` (``{"text", "secret", "kind", "lang"}``, and ``"asked"``
where the line answers an earlier message) and `tests/data/steering_fresh2.jsonl`
(``{"text", "steering", "shape", "lang"}``) were written after the detectors, in wordings and
shapes the earlier corpora lack, and measured once before any change (secret recall 0.877,
67 of 87 steering lines untrusted). `pytest -s -k table` prints the tables RELIABILITY.md shows.
"""

from __future__ import annotations

from collections import Counter

from test_redact_languages import rows, score

from dreamer.core.trust.admit import admit, admit_ledger


def stored(row: dict) -> str:
    if row.get("asked"):
        return admit_ledger(row["text"], asked=row["asked"])
    return admit(row["text"], writer="agent").text


def secret_scores() -> dict[str, Counter]:
    return score(rows("secrets_fresh2.jsonl"), stored)


def test_the_sets_span_thirty_languages_and_the_new_shapes():
    secrets, steering = rows("secrets_fresh2.jsonl"), rows("steering_fresh2.jsonl")
    assert len(secrets) >= 150 and len({r["lang"] for r in secrets}) >= 30
    assert all(r["secret"] in r["text"] for r in secrets if r["secret"])
    assert sum(1 for r in secrets if r.get("asked")) >= 10
    assert len(steering) >= 100 and len({r["lang"] for r in steering}) >= 30
    assert {"markdown_exfil", "html_comment", "html_tag", "tool_json", "front_matter", "base64", "widen"} <= {
        r["shape"] for r in steering
    }


def test_secrets_recall_and_precision_through_the_gate():
    c = secret_scores()["all"]
    found, changed = c["found"], c["changed"]
    assert (found, c["secrets"], changed, c["lookalikes"]) == (114, 114, 0, 38)
    assert found / c["secrets"] >= 0.98 and found / (found + changed) >= 0.95


def test_steering_stored_untrusted_and_benign_kept_through_the_gate():
    corpus = rows("steering_fresh2.jsonl")
    trusted = [r["text"] for r in corpus if r["steering"] and not admit(r["text"], writer="agent").untrusted]
    refused = [r["text"] for r in corpus if not r["steering"] and admit(r["text"], writer="agent").untrusted]
    benign = sum(1 for r in corpus if not r["steering"])
    assert trusted == []
    assert (benign - len(refused)) / benign >= 0.95 and refused == []


def test_table_per_language_and_kind():
    """The figures RELIABILITY.md shows: secrets found and look-alikes kept per language and
    kind; steering lines untrusted and benign lines kept per language."""
    scores = secret_scores()
    print("\n| group | secrets found | look-alikes kept |\n|---|---|---|")
    for group in sorted(scores, key=lambda g: (g != "all", g)):
        c = scores[group]
        kept = f"{c['lookalikes'] - c['changed']} / {c['lookalikes']}" if c["lookalikes"] else "-"
        print(f"| {group} | {c['found']} / {c['secrets']} | {kept} |")
    per: dict[str, Counter] = {}
    for r in rows("steering_fresh2.jsonl"):
        c = per.setdefault(r["lang"], Counter())
        untrusted = admit(r["text"], writer="agent").untrusted
        c["steering" if r["steering"] else "benign"] += 1
        c["flagged" if r["steering"] else "kept"] += untrusted if r["steering"] else not untrusted
    print("\n| language | steering untrusted | benign kept |\n|---|---|---|")
    for lang in sorted(per):
        c = per[lang]
        cells = [f"{c[a]} / {c[b]}" if c[b] else "-" for a, b in (("flagged", "steering"), ("kept", "benign"))]
        print(f"| {lang} | " + " | ".join(cells) + " |")
    assert sum(c["flagged"] for c in per.values()) == 87
