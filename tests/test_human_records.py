"""A person's word stands: a record edited in the Markdown is never superseded by a later dream
(the supersession is held, `review_required`); `dreamer sync` and the watcher read edits back."""

from __future__ import annotations

import json

import pytest
from clikit import run, write_chat
from dreamkit import judged_runtime, user_turns
from sqlmodel import select

from dreamer.core.models import Memory
from dreamer.engine.dream import dream_pass
from dreamer.engine.markdown import views as markdown
from dreamer.engine.view_watch import ViewWatcher
from dreamer.ingest.store import record_messages
from dreamer.store.db import session_scope


@pytest.fixture
def rt(settings, engine, scripted, tmp_path):
    runtime = judged_runtime(settings, engine, scripted, tmp_path)
    yield runtime
    runtime.close()


def statuses(rt) -> list[tuple[str, str, str]]:
    with session_scope(rt.engine) as s:
        return sorted((m.text, m.status, m.source) for m in s.exec(select(Memory)))


def test_a_dream_contradicting_a_human_edit_is_held_for_review(rt):
    record_messages(rt.engine, "s1", user_turns("I prefer tea with breakfast."), user_id="alice")
    dream_pass(rt)
    dreams = markdown.user_dir(rt.settings.workspace_dir, "alice") / markdown.DREAMS_FILE
    dreams.write_text(dreams.read_text().replace("prefers tea", "prefers green tea"))
    watcher = ViewWatcher(rt, 0)
    [report] = watcher.poll()  # as `serve` and `run` do every few seconds
    assert [e.event for e in report.applied] == ["edit"]
    assert watcher.poll() == []  # its own render is no edit
    record_messages(rt.engine, "s2", user_turns("I prefer coffee with breakfast."), user_id="alice")
    second = dream_pass(rt)
    assert (second.superseded, second.held) == (0, 1)
    assert statuses(rt) == [
        ("The user prefers coffee with breakfast.", "candidate", "dream"),
        ("The user prefers green tea with breakfast.", "review_required", "human"),
    ]


def test_sync_command_reads_edits_back_and_reports_unreadable_lines(tmp_path):
    chat = tmp_path / "c.jsonl"
    write_chat(chat, *[("user", "I prefer tea."), ("assistant", "ok")] * 4)
    run(tmp_path, "ingest", str(chat), "--user", "u")
    run(tmp_path, "dream")
    dreams = markdown.user_dir(tmp_path / "data" / "workspace", "u") / markdown.DREAMS_FILE
    dreams.write_text(dreams.read_text() + "- I keep bees\n")
    done = run(tmp_path, "sync", "--json")
    assert done.returncode == 0, done.stderr
    [report] = json.loads(done.stdout)
    assert [(e["event"], e["file"], e["line"]) for e in report["applied"]] == [("add", "DREAMS.md", 6)]
    texts = sorted(m["text"] for m in json.loads(run(tmp_path, "memories", "ls", "--json").stdout))
    assert texts == ["I keep bees", "The user prefers tea."]
    assert json.loads(run(tmp_path, "sync", "--json").stdout) == []

    broken = dreams.read_text() + "Stray words\n"
    dreams.write_text(broken)
    bad = run(tmp_path, "sync")
    assert bad.returncode == 1
    assert bad.stderr == "error: u: DREAMS.md:7: not an entry (the file is left as written)\n"
    assert dreams.read_text() == broken
