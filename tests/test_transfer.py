"""Export and import: a round trip through JSON lines keeps every field and every id of a store
with superseded, reverted and forgotten records, its sessions and messages; importing again
changes nothing; the index and the Markdown follow. Real passes, SQL, Qdrant Edge."""

from __future__ import annotations

import io
import json

from clikit import assert_one_error_line, run, write_chat
from dreamkit import judged_runtime, user_turns
from sqlmodel import select

from dreamer.core.models import Memory
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.engine.records.revert import revert_run
from dreamer.engine.records.transfer import export_records, import_records, read_records, write_export
from dreamer.ingest.store import record_messages
from dreamer.store import cabinet, db
from dreamer.store.db import session_scope


def runtime(settings, engine, server, tmp_path, name: str):
    return judged_runtime(settings, engine, server, tmp_path / name, data_dir=tmp_path / name)


def files(rt) -> dict[str, str]:
    ws = rt.settings.workspace_dir
    return {str(p.relative_to(ws)): p.read_text() for p in sorted(ws.rglob("*.md"))}


def dump(engine) -> list[dict]:
    return list(export_records(engine, sessions=True))


def a_store_with_every_status(rt):
    record_messages(
        rt.engine,
        "s1",
        user_turns("I prefer tea with breakfast.", "My api key is sk-abcdef0123456789abcdef0123"),
        user_id="alice",
    )
    dream_pass(rt)
    record_messages(
        rt.engine, "s2", user_turns("I prefer coffee with breakfast.", "I prefer jazz while working."), user_id="alice"
    )
    second = dream_pass(rt)
    revert_run(rt.engine, second.id)  # coffee and jazz reverted, tea current again
    record_messages(
        rt.engine, "s3", user_turns("I prefer coffee with breakfast.", "I prefer window seats."), user_id="alice"
    )
    dream_pass(rt)  # coffee supersedes tea
    with session_scope(rt.engine) as s:
        seats = s.exec(select(Memory).where(Memory.text == "The user prefers window seats.")).one()
        cabinet.forget(s, seats.id, reason="wrong")
    record_messages(rt.engine, "s4", user_turns("I prefer window seats."), user_id="alice")
    dream_pass(rt)  # refused: a person forgot it (a rejection the run keeps, with its text)
    outbox.drain(rt)


def test_a_round_trip_keeps_every_field_and_id(settings, engine, scripted, tmp_path):
    a = runtime(settings, engine, scripted, tmp_path, "a")
    a_store_with_every_status(a)
    exported = dump(engine)
    statuses = sorted(r["status"] for r in exported if r["type"] == "memory")
    assert statuses == ["candidate", "forgotten", "reverted", "reverted", "superseded"]
    rejected = [r["rejections"] for r in exported if r["type"] == "run"]
    assert rejected == [r["rejections"] for r in export_records(engine, user_id="alice") if r["type"] == "run"]
    assert sum(map(len, rejected)) == 1
    bobs = [r for r in export_records(engine, user_id="bob") if r["type"] != "header"]
    assert [(r["type"], r["rejections"]) for r in bobs] == [("run", [])] * 4  # none of alice's words
    text = io.StringIO()
    counts = write_export(engine, text, sessions=True)
    assert counts == {"run": 4, "session": 4, "message": 32, "memory": 5}

    other = db.make_engine(f"sqlite:///{tmp_path / 'b.db'}")
    db.upgrade(other)
    b = runtime(settings, other, scripted, tmp_path, "b")
    records = read_records(io.StringIO(text.getvalue()))
    result = import_records(other, records)
    assert (result.added, result.present) == ({"run": 4, "session": 4, "message": 32, "memory": 5}, {})
    outbox.drain(b)
    assert dump(other) == exported
    assert outbox.check(b).clean
    assert files(b) == files(a) and files(a) != {}

    again = import_records(other, records)  # idempotent, and into a live store too
    assert (again.added, again.present) == ({}, {"run": 4, "session": 4, "message": 32, "memory": 5})
    assert import_records(engine, records).added == {}
    assert dump(other) == exported and dump(engine) == exported
    a.close()
    b.close()
    other.dispose()


def test_export_and_import_commands(tmp_path):
    chat = tmp_path / "c.jsonl"
    write_chat(chat, *[("user", "I prefer tea."), ("assistant", "ok")] * 4)
    run(tmp_path, "ingest", str(chat), "--user", "u")
    run(tmp_path, "dream")
    out = tmp_path / "store.jsonl"
    done = run(tmp_path, "export", str(out), "--sessions")
    assert (done.returncode, done.stderr) == (0, "exported 1 run(s), 1 session(s), 8 message(s), 1 memory(s)\n")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    imported = run(fresh, "import", str(out), "--json")
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["added"] == {"run": 1, "session": 1, "message": 8, "memory": 1}
    assert [m["text"] for m in json.loads(run(fresh, "memories", "ls", "--json").stdout)] == ["The user prefers tea."]
    assert "The user prefers tea." in next((fresh / "data" / "workspace").rglob("DREAMS.md")).read_text()

    bad = tmp_path / "bad.jsonl"
    bad.write_text(out.read_text().splitlines()[0] + "\n{not json\n")
    failed = run(fresh, "import", str(bad))
    assert_one_error_line(failed)
    assert failed.stderr.startswith("error: line 2: not JSON")
