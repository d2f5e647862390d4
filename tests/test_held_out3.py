"""The third held-out sets through the one gate every writer asks (`admit`; an answer to an
earlier message through `admit_ledger` with that message).

`tests/data/secrets_fresh3.jsonl` and `steering_fresh3.jsonl` (the dev part: two lines of every
three) and `*_fresh3_check.jsonl` (the third line of every three) were written blind to the
detectors' words. Both parts were measured once before any change (secrets found 170 of 226,
4 of 81 look-alikes changed; steering 79 of 117 untrusted, 1 of 63 benign refused); the changes
were made reading the dev part only, and `*_fresh3_extra.jsonl` holds lines written for each
class fixed, in other languages, before the fix. `pytest -s -k table` prints the tables
RELIABILITY.md shows.
"""

from __future__ import annotations

from collections import Counter

import pytest
from test_held_out import stored
from test_redact_languages import rows, score

from dreamer.core.trust.admit import admit

SECRETS = {  # set: (found, secrets, look-alikes changed, look-alikes)
    "secrets_fresh3.jsonl": (145, 145, 0, 60),
    "secrets_fresh3_check.jsonl": (79, 81, 0, 21),
    "secrets_fresh3_extra.jsonl": (24, 24, 0, 7),
}


def both_parts(name: str) -> list[dict]:
    """The rows of a held-out set, its dev part and its check third ("secrets_fresh3")."""
    return rows(f"{name}.jsonl") + rows(f"{name}_check.jsonl")


def test_the_sets_span_thirty_languages():
    secrets, steering = both_parts("secrets_fresh3"), both_parts("steering_fresh3")
    assert len(secrets) == 307 and len({r["lang"] for r in secrets}) >= 35
    assert len(steering) == 180 and len({r["lang"] for r in steering}) >= 30
    assert all(r["secret"] in r["text"] for r in secrets if r["secret"])


@pytest.mark.parametrize("name", sorted(SECRETS))
def test_secrets_found_and_look_alikes_kept_through_the_gate(name):
    c = score(rows(name), stored)["all"]
    assert (c["found"], c["secrets"], c["changed"], c["lookalikes"]) == SECRETS[name]


def steering_counts(name: str) -> Counter:
    c: Counter = Counter()
    for r in rows(name):
        untrusted = admit(r["text"], writer="agent").untrusted
        c["steering" if r["steering"] else "benign"] += 1
        c["flagged" if r["steering"] else "refused"] += untrusted
    return c


def test_steering_check_third_through_the_gate():
    """Measured once before any change (26 of 37 untrusted, 0 of 23 refused) and once after,
    never read while tuning."""
    c = steering_counts("steering_fresh3_check.jsonl")
    assert (c["flagged"], c["steering"], c["refused"], c["benign"]) == (36, 37, 0, 23)


def test_table_per_language():
    """The figures RELIABILITY.md shows, per language, over both parts of the third sets."""
    per: dict[str, Counter] = {}
    for part in ("", "_check"):
        for group, c in score(rows(f"secrets_fresh3{part}.jsonl"), stored).items():
            if group.startswith("lang:"):
                per.setdefault(group[5:], Counter()).update({f"{k}{part}": v for k, v in c.items()})
        for r in rows(f"steering_fresh3{part}.jsonl"):
            c = per.setdefault(r["lang"], Counter())
            untrusted = admit(r["text"], writer="agent").untrusted
            c[("steering" if r["steering"] else "benign") + part] += 1
            c[("flagged" if r["steering"] else "kept") + part] += untrusted if r["steering"] else not untrusted
    print(
        "\n| language | secrets found (dev / check) | look-alikes kept | steering untrusted (dev / check) | benign kept |"
    )
    print("|---|---|---|---|---|")
    for lang in sorted(per):
        c = per[lang]
        cells = []
        for a, b in [("found", "secrets"), ("lookalikes", "lookalikes"), ("flagged", "steering"), ("kept", "benign")]:
            if a == "lookalikes":
                dev = f"{c['lookalikes'] - c['changed']}/{c['lookalikes']}" if c["lookalikes"] else "-"
                chk = (
                    f"{c['lookalikes_check'] - c['changed_check']}/{c['lookalikes_check']}"
                    if c["lookalikes_check"]
                    else "-"
                )
            else:
                dev = f"{c[a]}/{c[b]}" if c[b] else "-"
                chk = f"{c[a + '_check']}/{c[b + '_check']}" if c[b + "_check"] else "-"
            cells.append(f"{dev} / {chk}")
        print(f"| {lang} | " + " | ".join(cells) + " |")
    assert len(per) == 37
