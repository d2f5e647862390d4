"""A writer killed between its temp file and the rename leaves a temp file behind; the next
write to that folder removes it, and never a temp file of a live writer or another host."""

from __future__ import annotations

import os
import subprocess
import sys

from dreamer.engine.markdown import views as markdown


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_orphaned_temp_files_are_removed_by_the_next_write(tmp_path):
    host = markdown._HOST
    orphan = tmp_path / f".MEMORY.md.{host}~{dead_pid()}.abc123.tmp"
    live = tmp_path / f".USER.md.{host}~{os.getpid()}.def456.tmp"
    other_host = tmp_path / ".DREAMS.md.elsewhere~1.ghi789.tmp"
    for p in (orphan, live, other_host):
        p.write_text("partial")
    markdown.write_files([markdown.RenderedFile(tmp_path / "MEMORY.md", "# Memory\n")])
    assert not orphan.exists()
    assert live.exists() and other_host.exists()
    assert (tmp_path / "MEMORY.md").read_text() == "# Memory\n"


def test_a_temp_file_names_its_writer(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        real_replace(src, dst)

    monkeypatch.setattr(markdown.os, "replace", spy)
    markdown.write_atomic(tmp_path / "DREAMS.md", b"x")
    assert markdown._TEMP_RE.fullmatch(seen[0]).group("pid") == str(os.getpid())
