"""Bounded resources: a 50 MB transcript of 100 000 messages and a single 5 MB tool result go
through ingest and a dream pass in a fresh process; peak memory is reported per phase, the pass
reads only its token budget's worth of the session, and no prompt is larger than a chunk."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from dreamkit import extraction_script

from dreamer.core.settings import Settings
from dreamer.ingest.files import ingest_file
from dreamer.llm.scripted.server import ScriptedServer

from . import kit

pytestmark = pytest.mark.reliability

MESSAGES = 100_000
TARGET_BYTES = 50 * 1024 * 1024
TOOL_RESULT_BYTES = 5 * 1024 * 1024
PROMPT_OVERHEAD = 1_400  # the prompt card with its schema (at most 1 200, tests/test_cards.py) and the tags
WORDS = (
    "the deploy failed again because the cache key was stale and the retry loop gave up "
    "after three attempts while the pool was exhausted by long running report queries"
).split()


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=kit.DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


def write_transcript(path: Path) -> int:
    """One session of MESSAGES messages, about TARGET_BYTES in all; a preference now and then."""
    rng = random.Random(5)
    per_message = TARGET_BYTES // MESSAGES - 40
    with path.open("w", encoding="utf-8") as fh:
        for i in range(MESSAGES):
            words = []
            while sum(len(w) + 1 for w in words) < per_message:
                words.append(rng.choice(WORDS))
            text = " ".join(words)
            if i % 500 == 0:
                text = f"I prefer summary number {i} in bullets. " + text
            fh.write(json.dumps({"role": "user" if i % 2 == 0 else "assistant", "content": text}) + "\n")
    return path.stat().st_size


def run_child(data_dir: Path, url: str, scenario: str, source: Path) -> dict:
    tests = str(Path(__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tests, env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "reliability.bounded_child", str(data_dir), url, scenario, str(source)],
        capture_output=True,
        text=True,
        env=env,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def prompt_sizes(server) -> list[int]:
    return [
        r["usage"]["prompt_tokens"] for r in server.requests if r["path"].endswith("/chat/completions") and "usage" in r
    ]


def test_a_50_mb_transcript_of_100k_messages(server, tmp_path, figures):
    source = tmp_path / "big.jsonl"
    size = write_transcript(source)
    got = run_child(tmp_path / "data", server.url, "file", source)
    st = Settings(_env_file=None)
    prompts = prompt_sizes(server)
    figures(
        "bounded: 50 MB transcript, 100k messages: peak RSS",
        f"ingest {got['ingest_peak_mib']} MiB, pass {got['pass_peak_mib']} MiB",
        f"{size / 2**20:.0f} MB file; baseline {got['baseline_mib']} MiB; ingest {got['ingest_seconds']}s, "
        f"pass {got['pass_seconds']}s; {len(prompts)} prompts, largest {max(prompts)} tokens",
    )
    assert size >= TARGET_BYTES * 0.95
    assert got["ingest_messages"] == MESSAGES and not got["ingest_rejections"]
    assert got["run"]["sessions"] == 1 and 0 < got["run"]["messages"] < MESSAGES
    assert max(prompts) <= st.chunk_tokens + PROMPT_OVERHEAD, "chunked, never one giant prompt"
    assert len(prompts) <= math.ceil(st.tokens_per_session_pass / st.chunk_tokens) + 1
    assert got["pass_peak_mib"] - got["baseline_mib"] < 200, "the pass reads its budget, not the session"
    assert got["ingest_peak_mib"] - got["baseline_mib"] < 6 * size / 2**20, "ingest memory grows with the file, no more"


def test_a_single_5_mb_tool_result(server, tmp_path, figures):
    source = tmp_path / "tool.txt"
    line = "2024-05-01 10:00:00 INFO worker processed batch without errors\n"
    source.write_text(line * (TOOL_RESULT_BYTES // len(line) + 1))
    got = run_child(tmp_path / "data", server.url, "tool-result-api", source)
    prompts = prompt_sizes(server)
    figures(
        "bounded: 5 MB tool result: peak RSS",
        f"ingest {got['ingest_peak_mib']} MiB, pass {got['pass_peak_mib']} MiB",
        f"baseline {got['baseline_mib']} MiB; {len(prompts)} prompts, largest {max(prompts)} tokens",
    )
    assert got["run"]["sessions"] == 1
    assert max(prompts) <= Settings(_env_file=None).chunk_tokens + PROMPT_OVERHEAD
    assert got["pass_peak_mib"] - got["baseline_mib"] < 200


def test_a_5_mb_message_in_a_file_is_rejected_by_the_default_limit(sqlite_engine, tmp_path):
    path = tmp_path / "t.jsonl"
    big = "x" * TOOL_RESULT_BYTES
    rows = [
        {"role": "user", "content": "I prefer tea."},
        {"role": "tool", "tool_call_id": "c", "content": big},
        {"role": "user", "content": "bye"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    report = ingest_file(sqlite_engine, path, fmt="openai", user_id="u")
    assert report.added == 2
    assert [r.line for r in report.rejections] == [2] and "over the" in report.rejections[0].reason
