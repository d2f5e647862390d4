"""Reprocessing: each selection resets exactly its cursors, a second dream merges into the
memories already there (never duplicates), a dry run writes nothing, and the CLI refuses to
go on without --yes when nobody can answer its question."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import func, update
from sqlmodel import select

from dreamer.core.errors import ConfigError
from dreamer.core.models import Cursor, DreamRun, Memory, MemoryEvent, Message, Session, utcnow
from dreamer.core.settings import Settings
from dreamer.engine.dream import dream_pass
from dreamer.engine.records import reprocess as rp
from dreamer.engine.runtime import Runtime
from dreamer.engine.shared_index import open_shared_runtime
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.store import record_messages
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope


def session_with(text: str) -> list[dict]:
    out = []
    for i, line in enumerate([text, "ok", "sure", "thanks"]):
        out += [{"role": "user", "content": line}, {"role": "assistant", "content": f"reply {i}"}]
    return out


def store(engine) -> dict[str, int]:
    """s1, s2 (alice, active 10 days ago), s3 (bob, today), s4 (carol, quarantined, 20 days ago)."""
    ids = {
        "s1": record_messages(engine, "s1", session_with("I prefer quiet hotels."), user_id="alice").session_id,
        "s2": record_messages(engine, "s2", session_with("I prefer window seats."), user_id="alice").session_id,
        "s3": record_messages(engine, "s3", session_with("I prefer jazz records."), user_id="bob").session_id,
        "s4": record_messages(engine, "s4", session_with("I prefer oat milk."), user_id="carol").session_id,
    }
    now = utcnow()
    with session_scope(engine) as s:
        for name, days in (("s1", 10), ("s2", 10), ("s4", 20)):
            s.exec(update(Session).where(Session.id == ids[name]).values(updated_at=now - timedelta(days=days)))
        s.exec(
            update(Cursor)
            .where(Cursor.session_id == ids["s4"])
            .values(status="quarantined", attempts=3, last_error="LLMError: the model refused")
        )
    return ids


@pytest.fixture
def rt(settings, engine, tmp_path):
    runtime = Runtime.open(
        settings, engine=engine, llm=None, embedder=None, index=EdgeIndex(tmp_path / "edge", 64), busy=AlwaysIdle()
    )
    yield runtime
    runtime._index.close()


def snapshot(engine) -> dict:
    with session_scope(engine) as s:
        return {
            "cursors": {c.session_id: (c.processed_seq, c.status, c.attempts) for c in s.exec(select(Cursor))},
            "memories": sorted((m.id, m.text, m.status) for m in s.exec(select(Memory))),
            "events": Counter(e.event for e in s.exec(select(MemoryEvent))),
            "runs": s.exec(select(func.count()).select_from(DreamRun)).one(),
        }


SELECTIONS = {
    "session": (lambda ids: rp.Selection(session_ids=(ids["s2"],)), ["s2"]),
    "user": (lambda ids: rp.Selection(user_id="alice"), ["s1", "s2"]),
    "since": (lambda ids: rp.Selection(since=utcnow() - timedelta(days=1)), ["s3"]),
    "quarantined": (lambda ids: rp.Selection(quarantined=True), ["s4"]),
    "all": (lambda ids: rp.Selection(everything=True), ["s1", "s2", "s3", "s4"]),
}


@pytest.mark.parametrize("kind", list(SELECTIONS))
def test_each_selection_resets_exactly_its_cursors_and_reprocessing_merges(rt, kind):
    ids = store(rt.engine)
    first = dream_pass(rt, force=True)
    assert (first.sessions, first.added) == (3, 3)  # s4 is quarantined
    make, names = SELECTIONS[kind]
    sel = make(ids)
    chosen = {ids[n] for n in names}
    before = snapshot(rt.engine)

    with session_scope(rt.engine) as s:
        selected = rp.select_ids(s, sel)
    assert set(selected) == chosen
    assert rp.reset_cursors(rt.engine, selected) == len(chosen)
    reset = snapshot(rt.engine)["cursors"]
    for sid, cursor in before["cursors"].items():
        assert reset[sid] == ((0, "ok", 0) if sid in chosen else cursor)

    done = rp.reprocess(rt, selected)

    after = snapshot(rt.engine)
    for sid in chosen:
        assert after["cursors"][sid] == (8, "ok", 0)
    was_quarantined = ids["s4"] in chosen
    assert done.sessions == len(chosen)
    assert done.merged == len(chosen) - was_quarantined
    assert done.added == int(was_quarantined)
    assert len(after["memories"]) == len(before["memories"]) + was_quarantined
    assert after["events"]["merge"] == before["events"]["merge"] + len(chosen) - was_quarantined
    assert after["events"]["add"] == before["events"]["add"] + was_quarantined
    with session_scope(rt.engine) as s:
        texts = Counter(m.text for m in s.exec(select(Memory)))
    assert max(texts.values()) == 1  # nothing duplicated


def test_reprocessing_twice_keeps_one_memory_with_its_history(rt):
    ids = store(rt.engine)
    dream_pass(rt, force=True)
    rp.reprocess(rt, [ids["s1"]])
    rp.reprocess(rt, [ids["s1"]])
    with session_scope(rt.engine) as s:
        [m] = s.exec(select(Memory).where(Memory.user_id == "alice").where(Memory.text.contains("quiet"))).all()
        events = [
            e.event for e in s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == m.id).order_by(MemoryEvent.id))
        ]
    assert events == ["add", "merge", "merge"]
    assert m.status == "candidate"  # one session's evidence, however often it is read


def test_a_selection_is_exactly_one_kind_and_survives_json():
    with pytest.raises(ConfigError):
        rp.Selection()
    with pytest.raises(ConfigError):
        rp.Selection(user_id="alice", everything=True)
    since = rp.parse_since("2024-05-01")
    assert since.isoformat() == "2024-05-01T00:00:00+00:00"
    for sel in (
        rp.Selection(session_ids=(3, 1)),
        rp.Selection(user_id="a"),
        rp.Selection(since=since),
        rp.Selection(quarantined=True),
        rp.Selection(everything=True),
    ):
        assert rp.Selection.from_dict(json.loads(json.dumps(sel.to_dict()))) == sel
    with pytest.raises(ConfigError):
        rp.parse_since("last tuesday")


def test_the_estimate_is_message_tokens_plus_prompt_overhead_per_chunk(settings, sqlite_engine):
    ids = store(sqlite_engine)
    small = settings.model_copy(update={"chunk_tokens": 10})
    with session_scope(sqlite_engine) as s:
        tokens = dict(
            s.exec(select(Message.session_id, func.sum(Message.token_count)).group_by(Message.session_id)).all()
        )
        est = rp.estimate(s, [ids["s1"], ids["s3"]], settings)
        cut = rp.estimate(s, [ids["s1"]], small)
    overhead = rp.prompt_overhead(settings)
    assert overhead >= 50
    assert (est.sessions, est.messages, est.chunks) == (2, 16, 2)
    assert est.message_tokens == tokens[ids["s1"]] + tokens[ids["s3"]]
    assert est.tokens == est.message_tokens + 2 * overhead
    assert cut.chunks == -(-tokens[ids["s1"]] // 10)
    assert cut.overhead_tokens == cut.chunks * overhead


# --------------------------------------------------------------------------- the CLI


def cli(tmp_path, *args, env=None, stdin=subprocess.DEVNULL):
    e = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    e.update({"DREAMER_DATA_DIR": str(tmp_path / "data"), "DREAMER_EMBEDDER": "none", "DREAMER_LLM_BASE_URL": ""})
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dreamer", *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=tmp_path,
        stdin=stdin,
        timeout=120,
    )


@pytest.fixture
def cli_store(tmp_path):
    """The store the CLI finds in tmp_path/data, after a first dream."""
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", embedder="none", llm_base_url="")
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    ids = store(engine)
    with open_shared_runtime(settings, engine=engine, busy=AlwaysIdle()) as rt:
        assert dream_pass(rt, trigger="cli").sessions == 3
    yield engine, ids
    engine.dispose()


def test_cli_dry_run_says_what_and_how_much_and_writes_nothing(tmp_path, cli_store):
    engine, ids = cli_store
    before = snapshot(engine)
    files = sorted((p, p.read_bytes()) for p in (tmp_path / "data" / "workspace").rglob("*.md"))

    proc = cli(
        tmp_path,
        "reprocess",
        "--user",
        "alice",
        "--dry-run",
        "--json",
        env={"DREAMER_LLM_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    text = cli(tmp_path, "reprocess", "--all", "--dry-run")

    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert (plan["session_ids"], plan["messages"], plan["dry_run"]) == ([ids["s1"], ids["s2"]], 16, True)
    assert plan["estimated_tokens"] == plan["message_tokens"] + plan["overhead_tokens"] > 0
    assert text.returncode == 0 and "would reprocess every session: 4 session(s)" in text.stdout
    assert "rules extractor spends no tokens" in text.stdout
    assert snapshot(engine) == before
    assert sorted((p, p.read_bytes()) for p in (tmp_path / "data" / "workspace").rglob("*.md")) == files


def test_cli_without_yes_and_without_a_terminal_fails_cleanly(tmp_path, cli_store):
    engine, _ = cli_store
    before = snapshot(engine)
    proc = cli(tmp_path, "reprocess", "--all")
    assert proc.returncode == 1
    assert "pass --yes" in proc.stderr and "Traceback" not in proc.stderr
    assert snapshot(engine) == before
    neither = cli(tmp_path, "reprocess", "--yes")
    assert neither.returncode == 1 and "choose exactly one of" in neither.stderr


def test_cli_reprocess_with_yes_then_checkpoints(tmp_path, cli_store):
    engine, ids = cli_store
    proc = cli(tmp_path, "reprocess", "--quarantined", "--yes", "--json")
    assert proc.returncode == 0, proc.stderr
    done = json.loads(proc.stdout)
    assert (done["sessions"], done["messages"], done["added"], done["merged"]) == (1, 8, 1, 0)
    assert "reprocessing" in proc.stderr  # the progress bar

    again = json.loads(cli(tmp_path, "reprocess", "--all", "--yes", "--json").stdout)
    assert (again["sessions"], again["added"], again["merged"]) == (4, 0, 4)

    rows = json.loads(cli(tmp_path, "checkpoints", "ls", "--json").stdout)
    assert [(r["session_id"], r["processed_seq"], r["last_seq"], r["status"], r["attempts"]) for r in rows] == [
        (ids[n], 8, 8, "ok", 0) for n in ("s1", "s2", "s3", "s4")
    ]
    with session_scope(engine) as s:
        s.exec(
            update(Cursor).where(Cursor.session_id == ids["s2"]).values(status="failed", attempts=1, last_error="boom")
        )
    table = cli(tmp_path, "checkpoints", "ls", "--status", "failed")
    assert table.returncode == 0, table.stderr
    [row] = [ln for ln in table.stdout.splitlines() if "boom" in ln]
    assert "failed" in row and "s2" in row and "s1" not in table.stdout
