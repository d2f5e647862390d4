"""Forget means gone: after `dreamer forget`, no byte of the forgotten words is left in any file
under the data dir (the SQLite file, the index's segments and write-ahead log, the Markdown, the
offloaded bodies), nor in a later export; a dry run lists every place that holds them. Qdrant
Edge through the CLI on the embedded default, qdrant-client's local mode through the engine.
Real SQLite, Qdrant Edge, local mode, the rules extractor and the scripted model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import assert_one_error_line, run, write_chat
from dreamkit import make_runtime, user_turns

from dreamer.core.compaction.plan import Offload
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.dream import dream_pass
from dreamer.engine.records.cascade import Selection, forget_derived
from dreamer.index.server import QdrantClientIndex
from dreamer.ingest.store import record_messages
from dreamer.store import db
from dreamer.store.offloads import save_offloads

FIRST = ("zorblaxian", "quuxifrant")  # only in user u's first session
SECOND = "vexillomant"  # only in u's second session
KEEP = "plinthwort"  # only in user k's


def files_with(root: Path, *words: str) -> dict[str, list[str]]:
    """word -> every file under `root` whose bytes hold it (any case)."""
    found: dict[str, list[str]] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes().lower()
        for word in words:
            if word.encode() in data:
                found.setdefault(word, []).append(path.relative_to(root).as_posix())
    return found


def offload(engine, user: str, session: str, body: str) -> None:
    item = Offload(
        id=f"ofl_{session}{'0' * 18}"[:24], index=0, role="tool", tool="read", tool_call_id=None, body=body, tokens=9
    )
    save_offloads(engine, Scope(user), [item], session_id=session)


@pytest.fixture
def store(tmp_path):
    """User u in two sessions (c1, c2, with daily notes and offloaded bodies), user k in one."""

    def chat(name: str, *lines: str) -> None:  # four rounds: a session the dream pass reads
        said = [*lines, "fine", "sure", "thanks"][:4]
        write_chat(
            tmp_path / f"{name}.jsonl", *[pair for line in said for pair in (("user", line), ("assistant", "ok"))]
        )

    chat("c1", "I prefer zorblaxian tea in the morning.", "I like quuxifrant seats on trains.")
    chat("c2", "I prefer vexillomant jazz.")
    chat("k1", "I prefer plinthwort bread.")
    for names, user in ((("c1", "c2"), "u"), (("k1",), "k")):
        files = [str(tmp_path / f"{name}.jsonl") for name in names]
        assert run(tmp_path, "ingest", *files, "--user", user).returncode == 0
    assert run(tmp_path, "dream").returncode == 0
    for session in (1, 2):  # u's two sessions: daily notes
        assert run(tmp_path, "flush", "--session", str(session)).returncode == 0
    engine = db.make_engine(f"sqlite:///{tmp_path / 'data' / 'dreamer.db'}")
    offload(engine, "u", "c1", "tool output about zorblaxian")
    offload(engine, "u", "c2", "tool output about vexillomant")
    offload(engine, "k", "k1", "tool output about plinthwort")
    engine.dispose()
    data = tmp_path / "data"
    before = files_with(data, *FIRST, SECOND, KEEP)
    for word in (*FIRST, SECOND, KEEP):  # the test means something: each word is in SQL, index and Markdown
        where = " ".join(before[word])
        assert "dreamer.db" in where and "index/wal/" in where and "index/segments/" in where, (word, where)
        assert "workspace/" in where and ("/memory/" in where or word == KEEP), (word, where)
    return tmp_path


def test_forgetting_a_user_leaves_no_byte_of_their_words(store):
    done = run(store, "forget", "--user", "u")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("forgot user u: ")
    data = store / "data"
    left = files_with(data, *FIRST, SECOND, KEEP)
    assert [w for w in (*FIRST, SECOND) if w in left] == [], left
    kept = " ".join(left[KEEP])  # the other user's words stay where they were
    assert "dreamer.db" in kept and "index/segments/" in kept and "workspace/" in kept
    exported = run(store, "export", "-", "--sessions")
    assert exported.returncode == 0 and KEEP in exported.stdout
    assert [w for w in (*FIRST, SECOND) if w in exported.stdout] == []
    assert [w for w in (*FIRST, SECOND) if w in run(store, "recall", "tea seats jazz", "--user", "u").stdout] == []


def test_forgetting_a_session_leaves_no_byte_of_it_and_keeps_the_other(store):
    data = store / "data"
    folder = next(p for p in (data / "workspace").iterdir() if p.name.startswith("u-"))
    day = next((folder / "memory").glob("*.md")).name
    dry = run(store, "forget", "--user", "u", "--session", "c2", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines()[0] == (
        "would forget session c2: 2 memories forgotten, 0 kept with less evidence, 2 daily notes, 8 messages, 1 sessions"
    )
    assert [ln.strip() for ln in dry.stdout.splitlines() if not ln.startswith(("would", "  forget "))] == [
        "sql memory_events: 2",
        "sql daily_notes: 2",
        "sql memories: 2",
        "sql messages: 8",
        "sql cursors: 1",
        "sql sessions: 1",
        "sql offloaded_bodies: 1",
        "index points: 2",
        "markdown DREAMS.md: 1",
        f"markdown memory/{day}: 1",
    ]
    assert files_with(data, SECOND)[SECOND]  # a dry run changes nothing

    done = run(store, "forget", "--user", "u", "--session", "c2")
    assert done.returncode == 0, done.stderr
    left = files_with(data, *FIRST, SECOND, KEEP)
    assert SECOND not in left, left
    for word in (*FIRST, KEEP):  # u's other session and k stay, in SQL, the index and the Markdown
        where = " ".join(left[word])
        assert "dreamer.db" in where and "index/segments/" in where and "workspace/" in where, (word, where)
    listed = json.loads(run(store, "memories", "ls", "--status", "all", "--json").stdout)
    assert sorted(m["text"] for m in listed if m["user_id"] == "u" and m["kind"] == "preference") == [
        "The user likes quuxifrant seats on trains.",
        "The user prefers zorblaxian tea in the morning.",
    ]


def test_bad_input_is_one_line(tmp_path):
    assert run(tmp_path, "init").returncode == 0
    for args, message in (
        (("--session", "nope"), "error: no session nope of user u"),
        (("--memory", "nope"), "error: no memory nope of user u"),
    ):
        proc = run(tmp_path, "forget", "--user", "u", *args)
        assert_one_error_line(proc)
        assert proc.stderr.strip() == message
    proc = run(tmp_path, "forget", "--user", "u", "--memory", "abcdef", "--session", "c1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "Invalid value for --memory: give --memory or --session, not both" in proc.stderr


def test_forgetting_a_user_on_local_mode_leaves_no_byte_of_their_words(tmp_path, scripted):
    from dreamkit import extraction_script

    scripted.set_script(extraction_script())
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    index = QdrantClientIndex.local(settings.data_dir / "qdrant-local", collection="memories", dim=64)
    rt = make_runtime(settings, engine, scripted, index)
    try:
        for user, session, line in (("u", "s1", "I prefer zorblaxian tea."), ("k", "k1", "I prefer plinthwort bread.")):
            record_messages(rt.engine, session, user_turns(line), user_id=user)
        dream_pass(rt)
        before = files_with(settings.data_dir, FIRST[0], KEEP)
        assert all("qdrant-local/collection/memories/storage.sqlite" in before[w] for w in (FIRST[0], KEEP)), before
        done = forget_derived(rt, Selection("u"))
        assert done.applied and len(done.forgotten) == 1
        assert [h.payload["text"] for h in rt.index.search_text("bread", Scope("k"), 5)] == [
            "The user prefers plinthwort bread."
        ]
    finally:
        rt.close()
        engine.dispose()
    left = files_with(settings.data_dir, FIRST[0], KEEP)
    assert FIRST[0] not in left, left
    assert "qdrant-local/collection/memories/storage.sqlite" in left[KEEP] and "dreamer.db" in left[KEEP]
