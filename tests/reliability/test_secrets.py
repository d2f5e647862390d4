"""Secrets: a corpus of planted secret formats in chat messages, tool results and file contents
(a Claude Code transcript writing and reading files) goes through ingest and a dream pass. No
part of any secret reaches an LLM or embeddings request, a stored memory or its history, the
index payload, a Markdown file or a log line (logging captured at DEBUG). A sample of the team's
corpus of secrets said in words goes through the dream pass and the flush too."""

from __future__ import annotations

import json
import logging
import re

import pytest
from dreamkit import is_judgement, judge_reply
from sqlmodel import select

from dreamer.core.models import Cursor, DreamRun, Memory, MemoryEvent, Message
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import redact
from dreamer.engine.dream import dream_pass
from dreamer.engine.outbox import CHECKED_FIELDS
from dreamer.ingest.claude_code import TOOL_INPUT_CHARS
from dreamer.ingest.files import ingest_file
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.online.flush.notes import flush_session
from dreamer.online.recall import context
from dreamer.store.db import session_scope

from . import kit
from .secret_corpus import NEGATIVES, PLANTED, POSITIVES, PROSE, Planted, rnd

pytestmark = pytest.mark.reliability

WINDOW = 12  # any run of this many characters of a secret counts as a leak
STRADDLE = Planted("token_across_the_tool_result_cut", "", "ghp_" + rnd("straddle", 36), "tool")
STRADDLE_FILE = Planted("token_across_the_tool_input_cut", "", "glpat-" + rnd("straddle2", 20), "file")
CHECKED = PLANTED + (STRADDLE, STRADDLE_FILE)
LINE = re.compile(r"^\[(\d+)\] [^ :]+(?::[^ :]+)?( \(context\))?: (.*)$")
USER_SAID = re.compile(r"^\[\d+\] user: ")


def echo_model(body: dict) -> Reply:
    """A model that keeps everything: each new line of the transcript becomes a memory."""
    if is_judgement(body):
        return judge_reply(body, "new")
    code = "root_cause" in body["messages"][0]["content"]
    user = body["messages"][1]["content"]
    out = []
    for raw in user.splitlines():
        m = LINE.match(raw)
        if m and not m.group(2) and len(m.group(3).strip()) >= 3:
            out.append(
                {
                    "kind": "root_cause" if code else "preference",
                    "text": m.group(3)[:590],
                    "importance": 0.5,
                    "seqs": [int(m.group(1))],
                }
            )
    return Reply.json({"memories": out[:5]})


def windows(secret: str) -> set[str]:
    if len(secret) <= WINDOW:
        return {secret}
    return {secret[i : i + WINDOW] for i in range(len(secret) - WINDOW + 1)}


def leaked(planted: tuple[Planted, ...], haystack: str) -> set[str]:
    return {p.name for p in planted if any(w in haystack for w in windows(p.secret))}


def chat_messages(planted: list[Planted]) -> list[dict]:
    out = []
    for i, p in enumerate(planted):
        out += [
            {"role": "user", "content": f"I prefer this setup: {p.text}"},
            {"role": "assistant", "content": f"noted {i}"},
        ]
    return out


def tool_messages(planted: list[Planted], tool_chars: int) -> list[dict]:
    out = [{"role": "user", "content": "I prefer to check the logs first."}]
    for i, p in enumerate(planted):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "shell", "arguments": "{}"}}
        out += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"$ run step {i}\n{p.text}\nexit 0"},
        ]
    straddle = STRADDLE.secret  # straddles the cut the pass makes in long tool results
    filler = "x" * (tool_chars - 27)  # the token starts 20 characters before the cut
    out += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_long", "type": "function", "function": {"name": "shell", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "call_long", "content": f"{filler} token {straddle} done"},
    ]
    return out


def claude_code_lines(planted: list[Planted]) -> list[dict]:
    """Files written and read back in a Claude Code session (tool_use input and tool_result)."""
    base = {"sessionId": "cc-secrets", "cwd": "/srv/app", "timestamp": "2024-05-01T10:00:00Z"}
    lines = [
        {**base, "type": "user", "message": {"role": "user", "content": "The root cause was a bad config; fix it."}}
    ]
    for i, p in enumerate(planted):
        path = f"/srv/app/conf/file{i}.env"
        lines.append(
            {
                **base,
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": f"The root cause was file {i}; writing it."},
                        {
                            "type": "tool_use",
                            "id": f"w{i}",
                            "name": "Write",
                            "input": {"file_path": path, "content": p.text},
                        },
                    ],
                },
            }
        )
        lines.append(
            {
                **base,
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"w{i}", "content": f"wrote {path}"}],
                },
            }
        )
        lines.append(
            {
                **base,
                "type": "assistant",
                "message": {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": f"r{i}", "name": "Read", "input": {"file_path": path}}],
                },
            }
        )
        lines.append(
            {
                **base,
                "type": "user",
                "message": {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": f"r{i}", "content": p.text}],
                },
            }
        )
    big = "/srv/app/big.cfg"
    head = len(json.dumps({"file_path": big, "content": ""})) - 2  # where the content starts
    long_file = "y" * (TOOL_INPUT_CHARS - 15 - head - len(" see ")) + f" see {STRADDLE_FILE.secret} end"
    lines.append(
        {
            **base,
            "type": "assistant",
            "message": {
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "wl", "name": "Write", "input": {"file_path": big, "content": long_file}}
                ],
            },
        }
    )
    return lines


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=kit.DIM) as srv:
        srv.set_script(echo_model)
        yield srv


@pytest.mark.parametrize("extractor", ["llm", "rules"])
def test_no_planted_secret_leaves(extractor, settings, sqlite_engine, server, tmp_path, caplog, figures):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="sqlalchemy")  # it sets itself to WARNING unless told
    st = settings.model_copy(update={"min_rounds": 1, "max_sessions_per_pass": 50, "entries_per_session": 200})
    rt = kit.runtime(st, sqlite_engine, server, tmp_path, llm=extractor == "llm")
    by_place = {place: [p for p in PLANTED if p.place == place] for place in ("chat", "tool", "file")}
    try:
        record_messages(rt.engine, "chat", chat_messages(by_place["chat"]), user_id="alice")
        record_messages(rt.engine, "tools", tool_messages(by_place["tool"], st.tool_result_chars), user_id="alice")
        transcript = tmp_path / "cc.jsonl"
        transcript.write_text("\n".join(json.dumps(x) for x in claude_code_lines(by_place["file"])) + "\n")
        ingest_file(rt.engine, transcript, fmt="claude-code", user_id="alice")
        while dream_pass(rt).sessions:
            pass
        surfaces = _surfaces(rt, server, caplog)
    finally:
        rt.close()
    leaks = {name: leaked(CHECKED, text) for name, text in surfaces.items()}
    every = set().union(*leaks.values())
    figures(
        f"secrets ({extractor}): planted / leaked",
        f"{len(CHECKED)} / {len(every)}",
        ", ".join(f"{k}: {len(v)}" for k, v in leaks.items()),
    )
    assert len(PLANTED) >= 50
    assert every == set(), leaks
    assert "[REDACTED:" in surfaces["memories"], "redacted lines reached the memories: the check above saw them"
    if extractor == "llm":
        assert surfaces["requests"]


def _surfaces(rt, server, caplog) -> dict[str, str]:
    with session_scope(rt.engine) as s:
        stored = {
            "memories": [m.model_dump(mode="json") for m in s.exec(select(Memory)).all()],
            "history": [e.model_dump(mode="json") for e in s.exec(select(MemoryEvent)).all()],
            "runs": [r.model_dump(mode="json") for r in s.exec(select(DreamRun)).all()],
            "cursors": [c.model_dump(mode="json") for c in s.exec(select(Cursor)).all()],
        }
    markdown_text = "\n".join(p.read_text(encoding="utf-8") for p in rt.settings.workspace_dir.rglob("*.md"))
    logs = "\n".join(_formatted(r) for r in caplog.records)
    return {
        "requests": json.dumps([r["body"] for r in server.requests]),
        "memories": json.dumps(stored["memories"]),
        "history and runs": json.dumps([stored["history"], stored["runs"], stored["cursors"]]),
        "index payload": json.dumps(rt.index.payloads(CHECKED_FIELDS)),
        "markdown": markdown_text,
        "logs": logs,
    }


def _formatted(record: logging.LogRecord) -> str:
    text = record.getMessage()
    if record.exc_info:
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    return text


def gullible(body: dict) -> Reply:
    """A model that keeps every line: each becomes a memory (extraction) or a daily note (flush)."""
    if body["response_format"]["json_schema"]["name"] != "daily_notes":
        return echo_model(body)
    notes = []
    for raw in body["messages"][1]["content"].splitlines():
        m = LINE.match(raw)
        if m and not m.group(2) and USER_SAID.match(raw):
            notes.append({"text": m.group(3)[:590], "seqs": [int(m.group(1))]})
    return Reply.json({"notes": notes})


@pytest.mark.parametrize("raw", [False, True], ids=["stored redacted", "stored raw"])
def test_no_prose_secret_leaves(raw, settings, sqlite_engine, server, tmp_path, figures):
    """Passwords, passphrases and PINs said in prose, social security numbers, IBANs and phone
    numbers: none reaches the stored messages (unless kept raw on purpose), a memory, USER.md,
    DREAMS.md, the daily note, the index, the context block or what `dreamer flush` answers."""
    server.set_script(gullible)
    st = settings.model_copy(
        update={"min_rounds": 1, "entries_per_session": 200, "flush_max_notes": 50, "store_raw_messages": raw}
    )
    rt = kit.runtime(st, sqlite_engine, server, tmp_path)
    try:
        rec = record_messages(rt.engine, "prose", chat_messages(list(PROSE)), user_id="alice", raw=raw)
        while dream_pass(rt).sessions:
            pass
        flushed = flush_session(rt, rec.session_id)
        block = context(rt, Scope("alice"), budget_tokens=10_000)
        surfaces = {
            "memories": json.dumps([m.text for m in kit.memories(rt.engine)]),
            "markdown": "\n".join(p.read_text(encoding="utf-8") for p in rt.settings.workspace_dir.rglob("*.md")),
            "index payload": json.dumps(rt.index.payloads(CHECKED_FIELDS)),
            "context block": block.text,
            "flush output": json.dumps(flushed.as_json()),
            "requests": json.dumps([r["body"] for r in server.requests]),
        }
        if not raw:
            surfaces["messages"] = json.dumps(_stored_messages(rt.engine))
        files = sorted(p.name for p in rt.settings.workspace_dir.rglob("*.md"))
    finally:
        rt.close()
    leaks = {name: leaked(PROSE, text) for name, text in surfaces.items()}
    every = set().union(*leaks.values())
    figures(
        f"prose secrets ({'stored raw' if raw else 'stored redacted'}): planted / leaked",
        f"{len(PROSE)} / {len(every)}",
        ", ".join(f"{k}: {len(v)}" for k, v in leaks.items()),
    )
    assert len(PROSE) == 14
    assert every == set(), leaks
    assert {"USER.md", "DREAMS.md", f"{flushed.day}.md"} <= set(files)
    assert flushed.status == "flushed" and len(flushed.notes) == 14
    assert block.text.count("[REDACTED:") >= 1
    for kind in ("password", "passphrase", "pin", "ssn", "iban", "phone"):
        assert f"[REDACTED:{kind}]" in surfaces["memories"], kind


def _stored_messages(engine) -> list[str]:
    with session_scope(engine) as s:
        return [f"{m.content} {m.tool_calls}" for m in s.exec(select(Message)).all()]


SECRETS, LOOK_ALIKES = POSITIVES[::10], NEGATIVES[::10]  # every tenth of the team's corpus
SAID = SECRETS + LOOK_ALIKES
PER_SESSION = 5  # the keep-everything model keeps five lines a call: every line is kept


def test_the_corpus_said_through_the_dream_pass_and_the_flush(settings, sqlite_engine, server, tmp_path, figures):
    """A sample of the corpus said in sessions, each line kept by the model as a memory and as a
    daily note: no secret reaches a memory, a daily note, the index, the context block or the
    stored messages, and every look-alike is stored as said."""
    server.set_script(gullible)
    st = settings.model_copy(
        update={
            "min_rounds": 1,
            "max_sessions_per_pass": 50,
            "sessions_per_call": 1,
            "triage": False,
            "flush_max_notes": 50,
        }
    )
    rt = kit.runtime(st, sqlite_engine, server, tmp_path)
    try:
        ids = [
            _say(rt, SAID[start : start + PER_SESSION], f"said-{start}") for start in range(0, len(SAID), PER_SESSION)
        ]
        while dream_pass(rt).sessions:
            pass
        flushed = [flush_session(rt, i) for i in ids]
        stored, kept_as = _stored_messages(rt.engine), kit.memories(rt.engine)
        surfaces = {
            "memories": json.dumps([m.text for m in kept_as], ensure_ascii=False),
            "markdown": "\n".join(
                _entries(p.read_text(encoding="utf-8")) for p in rt.settings.workspace_dir.rglob("*.md")
            ),
            "index payload": json.dumps([p["text"] for p in rt.index.payloads(["text"]).values()], ensure_ascii=False),
            "context block": _entries(context(rt, Scope("alice"), budget_tokens=100_000).text),
            "messages": "\n".join(stored),
        }
    finally:
        rt.close()
    leaks = {k: [r["secret"] for r in SAID if r["secret"] and _leaked(r, v)] for k, v in surfaces.items()}
    kept = [r for r in LOOK_ALIKES if any(m.startswith(r["text"] + " ") and "[REDACTED:" not in m for m in stored)]
    every = set().union(*map(set, leaks.values()))
    dreamed = sum(m.source == "dream" for m in kept_as)
    figures(
        "corpus through the dream pass and the flush",
        f"{len(SECRETS)} secrets, {len(every)} leaked; {len(LOOK_ALIKES)} look-alikes, {len(kept)} kept",
        f"{dreamed} memories dreamed, {sum(len(f.notes) for f in flushed)} daily notes; "
        + ", ".join(f"{k}: {len(v)}" for k, v in leaks.items()),
    )
    assert every == set(), leaks
    assert len(kept) == len(LOOK_ALIKES)
    assert all(f.status == "flushed" for f in flushed) and sum(len(f.notes) for f in flushed) == len(SAID)
    assert dreamed >= len(SAID) - 2  # every line kept (two lines alike once redacted make one memory)
    assert surfaces["memories"].count("[REDACTED:") >= 2 * len(SECRETS) - 4  # a memory and a daily note each


def _say(rt, rows: list[dict], external_id: str) -> int:
    """The rows said by the user in one session, each answered "ok" (no line the model keeps)."""
    said = [m for r in rows for m in ({"role": "user", "content": r["text"]}, {"role": "assistant", "content": "ok"})]
    return record_messages(rt.engine, external_id, said, user_id="alice").session_id


def _leaked(row: dict, text: str) -> bool:
    """The secret of `row` is in `text`, and not as part of another line said (a short code may be)."""
    others = " ".join(redact(r["text"]) for r in SAID if r is not row)
    return row["secret"] in text and row["secret"] not in others


def _entries(text: str) -> str:
    """The entries of a Markdown file or a context block, without their ids and dates (a short
    code may be part of one)."""
    return "\n".join(
        re.sub(r" <!--.*?-->| \(as of [0-9-]+\)", "", ln) for ln in text.splitlines() if ln.startswith("- ")
    )
