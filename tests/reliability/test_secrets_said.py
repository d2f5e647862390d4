"""Secrets said in everyday words, in seven languages: the team's corpus
(`tests/data/secrets_corpus.jsonl`: passwords, PINs, CVVs, door, alarm, safe and locker codes,
Wi-Fi keys, security answers, one-time and recovery codes, cards, IBANs, national ids, keys; and
look-alikes that must stay) through `redact`, then a sample of it through every write path: an
agent write (`POST /v1/memories`, MCP `add_memory`), recorded messages (`POST
/v1/sessions/{id}/messages`, MCP `record_messages`) and the Claude Code SessionEnd hook.

A secret counts as redacted when its value is nowhere in the output; a look-alike as kept when
the output is the text as said."""

from __future__ import annotations

import json
import re
from collections import Counter

import anyio
import httpx
import httpx2
import pytest
from claudekit import SESSION, append_turns, hook_input
from clikit import run
from dreamkit import make_index
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from onlinekit import ALICE_WRITER, LiveServer, bearer, online_runtime, online_settings
from sqlmodel import col, select

from dreamer.core.models import Memory, Message
from dreamer.core.secrets.redact import redact
from dreamer.core.trust.memory_text import stored_text
from dreamer.engine.extraction.untrusted import injection_markers
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import db
from dreamer.store.db import session_scope

from .secret_corpus import CORPUS, NEGATIVES, POSITIVES

pytestmark = pytest.mark.reliability

LANGUAGES = {"en", "fr", "de", "es", "pt", "it", "ja"}


def spread(rows: list[dict], n: int) -> list[dict]:
    """`n` rows taken evenly across `rows` (every kind and language gets its turn)."""
    usable = [r for r in rows if not injection_markers(r["text"])]
    step = len(usable) / n
    return [usable[int(i * step)] for i in range(n)]


SAMPLE = spread(POSITIVES, 40) + spread(NEGATIVES, 20)


def scores(outputs: dict[str, str]) -> tuple[float, float, float, list[str]]:
    """(recall, look-alikes kept, precision, what went wrong) of `outputs` (text -> what was
    stored): a secret is found when its value is gone, a look-alike kept when nothing of it was
    taken for a secret (a memory's text may be recased or repunctuated; a message's may not)."""
    pos = [r for r in CORPUS if r["text"] in outputs and r["secret"]]
    neg = [r for r in CORPUS if r["text"] in outputs and not r["secret"]]
    misses = [r["text"] for r in pos if r["secret"] in outputs[r["text"]]]
    changed = [r["text"] for r in neg if "[REDACTED:" in outputs[r["text"]]]
    found = len(pos) - len(misses)
    recall = found / len(pos) if pos else 1.0
    kept = 1 - len(changed) / len(neg) if neg else 1.0
    precision = found / (found + len(changed)) if found + len(changed) else 1.0
    return recall, kept, precision, misses + changed


# --------------------------------------------------------------------------- the corpus


def test_the_corpus_is_large_and_varied():
    assert len(CORPUS) >= 300 and len(POSITIVES) >= 200 and len(NEGATIVES) >= 100
    assert {r["lang"] for r in POSITIVES} == LANGUAGES
    assert {r["lang"] for r in NEGATIVES} == LANGUAGES
    assert len({r["kind"] for r in POSITIVES}) >= 15
    assert all(r["secret"] in r["text"] for r in POSITIVES)
    assert len({r["text"] for r in CORPUS}) == len(CORPUS)


def test_the_corpus_through_redact(figures):
    outputs = {r["text"]: redact(r["text"]) for r in CORPUS}
    recall, kept, precision, wrong = scores(outputs)
    for lang in sorted(LANGUAGES):
        mine = [r for r in POSITIVES if r["lang"] == lang]
        found = sum(r["secret"] not in outputs[r["text"]] for r in mine)
        figures(f"secrets said in {lang}", f"{found} / {len(mine)} redacted")
    figures(
        "secret corpus",
        f"recall {recall:.3f}, precision {precision:.3f}, look-alikes kept {kept:.3f}",
        f"{len(POSITIVES)} secrets of {len(Counter(r['kind'] for r in POSITIVES))} kinds, {len(NEGATIVES)} look-alikes",
    )
    assert recall >= 0.98 and precision >= 0.95 and kept >= 0.95, wrong
    assert all("[REDACTED:" in outputs[r["text"]] for r in POSITIVES if r["secret"] not in outputs[r["text"]])
    assert all(redact(out) == out for out in outputs.values())  # redacting again changes nothing


# --------------------------------------------------------------------------- the AWS secret key

AWS_ID = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


@pytest.mark.parametrize(
    "text",
    [
        f"AWS creds: {AWS_ID} {AWS_SECRET}",
        f"key id {AWS_ID}, secret {AWS_SECRET}",
        f"{AWS_SECRET} goes with {AWS_ID}",
        f"access key: {AWS_ID}\nsecret: {AWS_SECRET}",
        f"the secret access key is {AWS_SECRET}",
        f"AWS secret key: {AWS_SECRET}",
        f"aws_secret_access_key = {AWS_SECRET}",
    ],
)
def test_an_aws_secret_key_beside_its_id_or_labelled_is_redacted(text):
    out = redact(text)
    assert AWS_SECRET not in out and AWS_SECRET[:12] not in out and AWS_SECRET[-12:] not in out
    assert "[REDACTED:aws_secret_key]" in out
    assert AWS_ID not in out  # and its id beside it


def test_a_forty_character_string_alone_is_no_aws_secret_key():
    for text in [
        "commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",  # a git hash
        f"the build id is {AWS_SECRET.lower().replace('/', 'x')} and it passed",
    ]:
        assert "aws_secret_key" not in redact(text)


# --------------------------------------------------------------------------- every write path


@pytest.fixture
def live(settings, sqlite_engine, tmp_path):
    st = online_settings(settings)
    with ScriptedServer(embed_dim=64) as scripted:
        rt = online_runtime(st, sqlite_engine, scripted, make_index("edge", tmp_path), llm=False)
        try:
            with LiveServer(create_app(rt)) as server, httpx.Client(base_url=server.url, timeout=60) as client:
                yield rt, server, client
        finally:
            rt.close()


def stored_messages(engine) -> list[str]:
    with session_scope(engine) as s:
        query = select(Message.content).order_by(col(Message.session_id), col(Message.seq))
        return [c for c in s.exec(query).all() if c]


def markers(outputs: dict[str, str]) -> dict[str, list[str]]:
    """The redaction markers of each output, in order."""
    return {text: re.findall(r"\[REDACTED:[a-z0-9_]+\]", out) for text, out in outputs.items()}


def by_text(rows: list[dict], stored: list[str]) -> dict[str, str]:
    assert len(stored) == len(rows)
    return {r["text"]: out for r, out in zip(rows, stored)}


def test_a_sample_through_the_http_api(live, figures):
    rt, _, client = live
    h = bearer(ALICE_WRITER)
    written = {}
    for r in SAMPLE:
        answer = client.post("/v1/memories", headers=h, json={"text": r["text"]})
        assert answer.status_code == 200, (r["text"], answer.text)
        written[r["text"]] = answer.json()["text"]
    assert markers(written) == markers({r["text"]: stored_text(r["text"]) for r in SAMPLE})  # the one redactor
    messages = [{"role": "user", "content": r["text"]} for r in SAMPLE]
    assert client.post("/v1/sessions/http-1/messages", headers=h, json={"messages": messages}).status_code == 200
    recorded = by_text(SAMPLE, stored_messages(rt.engine))
    assert recorded == {r["text"]: redact(r["text"]) for r in SAMPLE}
    block = client.get("/v1/context", headers=h, params={"budget": 100_000}).json()
    with session_scope(rt.engine) as s:
        rows = " ".join(m.text for m in s.exec(select(Memory)).all())
    payloads = " ".join(str(p.get("text", "")) for p in rt.index.payloads(["text"]).values())
    entries = " ".join(line for line in block["text"].splitlines() if line.startswith("- "))  # not the block's id
    everywhere = " ".join([entries, rows, payloads])
    assert everywhere.count("[REDACTED:") >= 2 * sum(1 for r in SAMPLE if r["secret"])
    others = " ".join(redact(r["text"]) for r in SAMPLE)  # a short code may be part of another line
    leaked = [r["secret"] for r in SAMPLE if r["secret"] and r["secret"] in everywhere and r["secret"] not in others]
    for name, outputs in (("POST /v1/memories", written), ("POST /v1/sessions/{id}/messages", recorded)):
        recall, kept, precision, wrong = scores(outputs)
        figures(f"sample through {name}", f"recall {recall:.3f}, look-alikes kept {kept:.3f}", ", ".join(wrong))
        assert recall >= 0.98 and kept >= 0.95
    assert leaked == []


async def through_mcp(url: str, rows: list[dict]) -> dict[str, str]:
    written = {}
    async with httpx2.AsyncClient(headers=bearer(ALICE_WRITER), timeout=60) as http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                messages = [{"role": "user", "content": r["text"]} for r in rows]
                recorded = await session.call_tool("record_messages", {"session_id": "mcp-1", "messages": messages})
                assert not recorded.is_error, recorded.content
                for r in rows:
                    added = await session.call_tool("add_memory", {"text": r["text"]})
                    assert not added.is_error, (r["text"], added.content)
                    written[r["text"]] = json.loads(added.content[0].text)["text"]
    return written


def test_a_sample_through_mcp(live, figures):
    rt, server, _ = live
    rows = SAMPLE[::3]
    written = anyio.run(through_mcp, server.url, rows)
    assert markers(written) == markers({r["text"]: stored_text(r["text"]) for r in rows})
    recorded = by_text(rows, stored_messages(rt.engine))
    assert recorded == {r["text"]: redact(r["text"]) for r in rows}
    recall, kept, _, wrong = scores({**written, **recorded})
    figures(
        "sample through MCP add_memory and record_messages", f"recall {recall:.3f}, kept {kept:.3f}", ", ".join(wrong)
    )
    assert recall >= 0.98 and kept >= 0.95


def test_a_sample_through_the_session_end_hook(tmp_path, figures):
    assert run(tmp_path, "init").returncode == 0
    transcript = tmp_path / f"{SESSION}.jsonl"
    append_turns(transcript, *(("user", r["text"]) for r in SAMPLE))
    proc = run(tmp_path, "hook", "SessionEnd", input=hook_input("SessionEnd", transcript, reason="exit"),
               env={"DREAMER_LOCAL_USER": "alice"})  # fmt: skip
    assert (proc.returncode, proc.stderr) == (0, "")
    engine = db.make_engine(f"sqlite:///{tmp_path / 'data' / 'dreamer.db'}")
    try:
        recorded = by_text(SAMPLE, stored_messages(engine))
    finally:
        engine.dispose()
    assert recorded == {r["text"]: redact(r["text"]) for r in SAMPLE}
    recall, kept, _, wrong = scores(recorded)
    figures("sample through the SessionEnd hook", f"recall {recall:.3f}, kept {kept:.3f}", ", ".join(wrong))
    assert recall >= 0.98 and kept >= 0.95
