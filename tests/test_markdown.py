"""The Markdown view: exact files, ranking and cap, round trip, atomic writes, safe folders."""

from __future__ import annotations

import fcntl
import os
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamer.core.models import Memory
from dreamer.engine.markdown.entries import Entry, escape_text, parse_entries, unescape_text
from dreamer.engine.markdown.render import NOTE, render_user
from dreamer.engine.markdown.views import (
    RENDER_LOCK,
    RenderedFile,
    append_daily_note,
    render_lock,
    safe_name,
    user_dir,
    write_files,
)

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
USER = "alice"


def mem(
    id: str,
    kind: str,
    text: str,
    *,
    status: str = "verified",
    sessions: int = 0,
    importance: float = 0.5,
    age_days: float = 0,
    project: str | None = None,
    user_id: str = USER,
) -> Memory:
    when = T0 - timedelta(days=age_days)
    return Memory(
        id=id,
        user_id=user_id,
        kind=kind,
        text=text,
        content_hash=id,
        status=status,
        project=project,
        evidence=[{"session_id": i, "seq": 1} for i in range(sessions)],
        importance=importance,
        created_at=when,
        updated_at=when,
        last_seen=when,
    )


def by_name(files: list[RenderedFile], base: Path) -> dict[str, str]:
    return {f.path.relative_to(base).as_posix(): f.content for f in files}


def ids(content: str) -> list[str]:
    return [e.memory_id for e in parse_entries(content)]


FIXED = [
    mem("p1", "preference", "Prefers tabs\nover spaces", sessions=2, importance=0.9),
    mem("p2", "preference", "Likes short answers", status="candidate", sessions=1),
    mem("u1", "profile", "Works at ACME as an SRE", status="review_required"),
    mem("f1", "focus", "Migrating billing to Postgres", sessions=3, importance=0.7),
    mem("r1", "root_cause", "Deploy fails when --> appears in a label", project="web/app"),
    mem("d1", "design_decision", "Use SQLite WAL for the store", project="web/app", sessions=2),
    mem("x1", "lesson", "Pin the base image digest"),
    mem("n1", "daily_note", "Talked about tabs"),
    mem("s1", "preference", "Old: likes spaces", status="superseded", sessions=5),
    mem("g1", "focus", "Forgotten focus", status="forgotten"),
    mem("o1", "preference", "Someone else's", user_id="bob"),
]


def header(title: str) -> str:
    return f"# {title}\n\n{NOTE}\n\n"


def test_exact_files_for_fixed_memories(tmp_path):
    files = render_user(tmp_path, USER, FIXED)
    base = user_dir(tmp_path, USER)
    got = by_name(files, base)
    project_file = f"coding/{safe_name('web/app')}.md"
    assert list(got) == ["MEMORY.md", "USER.md", "DREAMS.md", project_file]
    assert got["MEMORY.md"] == header("Memory") + (
        "## Preferences\n\n"
        "- Prefers tabs over spaces (2 sessions) <!-- id:p1 kind:preference status:verified -->\n\n"
        "## Focus\n\n"
        "- Migrating billing to Postgres (3 sessions) <!-- id:f1 kind:focus status:verified -->\n\n"
        "## Root causes\n\n"
        "- Deploy fails when --&gt; appears in a label <!-- id:r1 kind:root_cause status:verified -->\n\n"
        "## Design decisions\n\n"
        "- Use SQLite WAL for the store (2 sessions) <!-- id:d1 kind:design_decision status:verified -->\n\n"
        "## Lessons\n\n"
        "- Pin the base image digest <!-- id:x1 kind:lesson status:verified -->\n"
    )
    assert got["USER.md"] == header("User") + (
        "## Profile\n\n"
        "- Works at ACME as an SRE <!-- id:u1 kind:profile status:review_required -->\n\n"
        "## Preferences\n\n"
        "- Prefers tabs over spaces (2 sessions) <!-- id:p1 kind:preference status:verified -->\n"
    )
    assert got["DREAMS.md"] == header("Dreams") + (
        "- Migrating billing to Postgres (3 sessions) <!-- id:f1 kind:focus status:verified -->\n"
        "- Prefers tabs over spaces (2 sessions) <!-- id:p1 kind:preference status:verified -->\n"
        "- Likes short answers <!-- id:p2 kind:preference status:candidate -->\n"
        "- Works at ACME as an SRE <!-- id:u1 kind:profile status:review_required -->\n"
    )
    assert got[project_file] == header("Coding: web/app") + (
        "## Root causes\n\n"
        "- Deploy fails when --&gt; appears in a label <!-- id:r1 kind:root_cause status:verified -->\n\n"
        "## Design decisions\n\n"
        "- Use SQLite WAL for the store (2 sessions) <!-- id:d1 kind:design_decision status:verified -->\n"
    )


def test_superseded_forgotten_and_other_users_never_shown(tmp_path):
    for f in render_user(tmp_path, USER, FIXED):
        for hidden in ("s1", "g1", "o1", "n1"):
            assert f"id:{hidden} " not in f.content
        assert "Old: likes spaces" not in f.content and "Someone else" not in f.content


def test_empty_user_gets_headed_files(tmp_path):
    got = by_name(render_user(tmp_path, USER, []), user_dir(tmp_path, USER))
    assert got == {
        "MEMORY.md": header("Memory") + "_No entries._\n",
        "USER.md": header("User") + "_No entries._\n",
        "DREAMS.md": header("Dreams") + "_No entries._\n",
    }


def test_output_is_deterministic(tmp_path):
    shuffled = FIXED[:]
    random.Random(7).shuffle(shuffled)
    assert render_user(tmp_path, USER, FIXED) == render_user(tmp_path, USER, shuffled)


# --- ranking and the cap ----------------------------------------------------------------

RANKED = [
    mem("a", "preference", "A", status="verified", sessions=1),
    mem("b", "focus", "B", status="candidate", sessions=3, importance=0.5),
    mem("c", "profile", "C", status="verified", sessions=2),
    mem("d", "preference", "D", status="candidate", sessions=3, importance=0.9),
    mem("e", "focus", "E", status="review_required", sessions=0),
]


def test_dreams_ranking_and_cap_with_archive(tmp_path):
    got = by_name(render_user(tmp_path, USER, RANKED, dreams_cap=3), user_dir(tmp_path, USER))
    assert ids(got["DREAMS.md"]) == ["c", "a", "d"]
    assert ids(got["DREAMS.archive.md"]) == ["b", "e"]
    assert got["DREAMS.archive.md"].startswith("# Dreams archive\n")


def test_ranking_ties_break_on_recency_then_id(tmp_path):
    memories = [
        mem("z", "focus", "old", age_days=3),
        mem("y", "focus", "new", age_days=1),
        mem("x", "focus", "same as y", age_days=1),
    ]
    got = by_name(render_user(tmp_path, USER, memories), user_dir(tmp_path, USER))
    assert ids(got["DREAMS.md"]) == ["x", "y", "z"]


def test_no_archive_until_needed_then_never_stale(tmp_path):
    base = user_dir(tmp_path, USER)
    assert "DREAMS.archive.md" not in by_name(render_user(tmp_path, USER, RANKED), base)
    write_files(render_user(tmp_path, USER, RANKED, dreams_cap=3))
    assert ids((base / "DREAMS.archive.md").read_text()) == ["b", "e"]
    write_files(render_user(tmp_path, USER, RANKED, dreams_cap=50))
    assert (base / "DREAMS.archive.md").read_text() == header("Dreams archive") + "_No entries._\n"
    assert ids((base / "DREAMS.md").read_text()) == ["c", "a", "d", "b", "e"]


def test_project_without_memories_is_emptied_not_left_stale(tmp_path):
    code = [mem("r1", "root_cause", "Null deref in parser", project="parser")]
    base = user_dir(tmp_path, USER)
    write_files(render_user(tmp_path, USER, code))
    path = base / "coding" / f"{safe_name('parser')}.md"
    assert ids(path.read_text()) == ["r1"]
    write_files(render_user(tmp_path, USER, []))
    assert path.read_text() == header("Coding: parser") + "_No entries._\n"


def test_code_memory_without_project(tmp_path):
    got = by_name(render_user(tmp_path, USER, [mem("r", "root_cause", "X")]), user_dir(tmp_path, USER))
    assert ids(got["coding/_unscoped.md"]) == ["r"]


# --- round trip -------------------------------------------------------------------------


def test_round_trip_ids_and_texts(tmp_path):
    memories = [
        mem("m1", "focus", "Plain text"),
        mem("m2", "focus", "Has --> an arrow and <!-- an opener", sessions=2),
        mem("m3", "focus", "Line one\nline two\r\nline three"),
        mem("m4", "focus", "Ends like a count (3 sessions)"),
        mem("m5", "focus", "Entities &gt; and &lt;!-- and &amp;gt; stay literal"),
        mem("m6", "focus", "Markdown *stars* and `code` and # hash"),
        mem("m7", "focus", "Ends like a count (4 sessions)", sessions=4),
    ]
    content = by_name(render_user(tmp_path, USER, memories), user_dir(tmp_path, USER))["DREAMS.md"]
    back = {e.memory_id: e for e in parse_entries(content)}
    assert set(back) == {m.id for m in memories}
    for m in memories:
        assert back[m.id].text == " ".join(m.text.splitlines())
        assert back[m.id].kind == "focus" and back[m.id].status == "verified"
    assert all(line.count("-->") == 1 for line in content.splitlines() if line.startswith("- "))


def test_parse_tolerates_a_persons_edits():
    content = (
        "# Memory\n\nSome words a person added.\n\n"
        "- Edited text, longer now (2 sessions) <!-- id:m1 kind:preference status:verified -->\n"
        "  * Indented star bullet   <!--  id:m2   kind:focus  -->  \n"
        "+ No kind or status <!-- id:m3 -->\n"
        "- A bullet a person wrote without an id\n"
        "- <!-- id:m4 kind:focus status:candidate -->\n"
        "- <!-- a plain comment -->\n"
    )
    assert parse_entries(content) == [
        Entry("m1", "Edited text, longer now", "preference", "verified"),
        Entry("m2", "Indented star bullet", "focus", None),
        Entry("m3", "No kind or status", None, None),
        Entry("m4", "", "focus", "candidate"),
    ]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escape_round_trip(text):
    line = escape_text(text)
    assert "\n" not in line and "<!--" not in line and "-->" not in line
    assert unescape_text(line) == " ".join(text.splitlines()).strip()


def test_secrets_never_reach_a_file(tmp_path):
    leaked = "ghp_" + "A1b2C3d4" * 4 + "E5f6"
    files = render_user(tmp_path, USER, [mem("k", "preference", f"Uses token {leaked} for CI")])
    assert all(leaked not in f.content for f in files)
    assert "[REDACTED:github_token]" in by_name(files, user_dir(tmp_path, USER))["MEMORY.md"]


# --- writing ----------------------------------------------------------------------------


def test_write_files_atomic_and_skips_unchanged(tmp_path):
    files = render_user(tmp_path, USER, FIXED)
    write_files(files)
    base = user_dir(tmp_path, USER)
    for f in files:
        assert f.path.read_text(encoding="utf-8") == f.content
    leftovers = [p for p in base.rglob("*") if p.is_file() and p.suffix == ".tmp"]
    assert leftovers == []
    assert sorted(p.name for p in base.rglob("*") if p.is_file()) == sorted(f.path.name for f in files)

    old = 1_000_000_000
    for f in files:
        os.utime(f.path, ns=(old, old))
    write_files(render_user(tmp_path, USER, FIXED))
    assert all(f.path.stat().st_mtime_ns == old for f in files)

    changed = FIXED + [mem("new", "lesson", "A new lesson")]
    write_files(render_user(tmp_path, USER, changed))
    assert (base / "MEMORY.md").stat().st_mtime_ns != old
    assert (base / "USER.md").stat().st_mtime_ns == old
    assert "id:new " in (base / "MEMORY.md").read_text()


def test_write_files_keeps_existing_mode(tmp_path):
    path = tmp_path / "x" / "f.md"
    write_files([RenderedFile(path, "one\n")])
    os.chmod(path, 0o640)
    write_files([RenderedFile(path, "two\n")])
    assert path.read_text() == "two\n"
    assert path.stat().st_mode & 0o777 == 0o640


# --- safe folders -----------------------------------------------------------------------

HOSTILE = [
    "../x",
    "../../etc/passwd",
    "/etc",
    "a/b",
    "a\\b",
    "a\x00b",
    ".",
    "..",
    "",
    " ",
    "x" * 10_000,
    "Alice",
    "alice",
    "ALICE",
    "аlice",  # Cyrillic a
    "ａｌｉｃｅ",  # full-width
    "alice\u200b",
    "a",
    "../a",
    "a/",
    "a\n",
    "CON",
    "-rf",
    "\udcff",
]


@pytest.mark.parametrize("user_id", HOSTILE)
def test_user_dir_stays_inside_workspace(tmp_path, user_id):
    d = user_dir(tmp_path, user_id)
    assert d.parent == tmp_path
    assert d.resolve().is_relative_to(tmp_path.resolve())
    assert d.resolve() != tmp_path.resolve()
    name = d.name
    assert len(name) <= 40 + 1 + 12
    assert all(c.isascii() and (c.isalnum() or c in "-_") for c in name)
    assert name == name.lower() and not name.startswith(("-", "."))


def test_distinct_ids_get_distinct_folders(tmp_path):
    names = [user_dir(tmp_path, u).name for u in HOSTILE]
    assert len(set(names)) == len(HOSTILE)
    assert len({n.lower() for n in names}) == len(HOSTILE)
    assert user_dir(tmp_path, "Alice") != user_dir(tmp_path, "alice")
    assert user_dir(tmp_path, "../a") != user_dir(tmp_path, "a")
    assert user_dir(tmp_path, "alice") == user_dir(tmp_path, "alice")
    assert user_dir(tmp_path, "alice").name.startswith("alice-")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_safe_name_is_always_a_plain_name(s):
    name = safe_name(s)
    assert "/" not in name and "\\" not in name and "\x00" not in name and name not in (".", "..")
    assert 14 <= len(name) <= 53


def test_hostile_project_names_stay_in_coding(tmp_path):
    memories = [mem(f"r{i}", "root_cause", "x", project=p) for i, p in enumerate(["../../evil", "/etc", "A", "a"])]
    base = user_dir(tmp_path, USER)
    files = render_user(tmp_path, USER, memories)
    coding = [f.path for f in files if f.path.parent.name == "coding"]
    assert len(coding) == 4 and len(set(coding)) == 4
    assert all(p.resolve().parent == (base / "coding").resolve() for p in coding)


# --- daily notes ------------------------------------------------------------------------


def test_append_daily_note_creates_appends_and_is_idempotent(tmp_path):
    path = append_daily_note(tmp_path, USER, "2024-05-01", [("n1", "Discussed tabs"), ("n2", "Line\nbreak -->")])
    assert path == user_dir(tmp_path, USER) / "memory" / "2024-05-01.md"
    first = path.read_text()
    assert first == (
        "# Daily notes 2024-05-01\n\n"
        "- Discussed tabs <!-- id:n1 kind:daily_note -->\n"
        "- Line break --&gt; <!-- id:n2 kind:daily_note -->\n"
    )
    append_daily_note(tmp_path, USER, "2024-05-01", [("n1", "Discussed tabs again"), ("n3", "Third")])
    second = path.read_text()
    assert second == first + "- Third <!-- id:n3 kind:daily_note -->\n"
    append_daily_note(tmp_path, USER, "2024-05-01", [("n1", "x"), ("n2", "y"), ("n3", "z")])
    assert path.read_text() == second
    assert [e.memory_id for e in parse_entries(second)] == ["n1", "n2", "n3"]
    assert parse_entries(second)[1].text == "Line break -->"


def test_append_daily_note_keeps_a_persons_edits(tmp_path):
    path = append_daily_note(tmp_path, USER, "2024-05-02", [("n1", "One")])
    path.write_text(path.read_text() + "A line the person typed, no newline")
    append_daily_note(tmp_path, USER, "2024-05-02", [("n2", "Two"), ("n2", "Two again")])
    assert path.read_text() == (
        "# Daily notes 2024-05-02\n\n"
        "- One <!-- id:n1 kind:daily_note -->\n"
        "A line the person typed, no newline\n"
        "- Two <!-- id:n2 kind:daily_note -->\n"
    )


def test_append_daily_note_with_nothing_new_does_not_create(tmp_path):
    path = append_daily_note(tmp_path, USER, "2024-05-03", [])
    assert not path.exists()


@pytest.mark.parametrize("day", ["../2024-05-01", "2024-5-1", "2024-13-01", "2024-05-01\n", "today", "2024-05-01/x"])
def test_append_daily_note_rejects_bad_days(tmp_path, day):
    with pytest.raises(ValueError):
        append_daily_note(tmp_path, USER, day, [("n1", "x")])


def test_render_lock_is_exclusive_across_open_files(tmp_path):
    folder = user_dir(tmp_path, USER)
    with render_lock(folder):
        other = os.open(folder / RENDER_LOCK, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(other)
    other = os.open(folder / RENDER_LOCK, os.O_RDWR)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on leaving
    finally:
        os.close(other)
