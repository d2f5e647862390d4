"""A disk that is really full: a small tmpfs mounted for the test, filled to the last byte. The
store and the embedded index die with a bus error when they write or map a page there, so every
command refuses in one line before it opens them, whatever DREAMER_MIN_FREE_MB says.

Mounting needs root: without it the test is skipped, and fails under DREAMER_REQUIRE_SERVICES=1
(CI), where the machine allows it."""

from __future__ import annotations

import os
import subprocess

import pytest
from clikit import assert_one_error_line, run, write_chat
from conftest import services_required

from dreamer.core.private import HARD_FLOOR_MB


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        message = f"cannot mount a small tmpfs: {done.stderr.strip() or done.returncode}"
        if services_required():
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(folder) -> None:
    """Write zeros until the disk refuses a byte more."""
    fd = os.open(folder / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        size = 1 << 20
        while size:
            try:
                os.write(fd, b"\0" * size)
            except OSError:
                size //= 2
    finally:
        os.close(fd)


@pytest.mark.parametrize("args", [("reindex", "--check"), ("reindex",), ("dream",)], ids=" ".join)
def test_a_really_full_disk_is_refused_in_one_line(tmp_path, small_disk, args):
    write_chat(tmp_path / "c.jsonl", *[("user", "I prefer green tea."), ("assistant", "ok")] * 4)
    data = {"DREAMER_DATA_DIR": str(small_disk / "data"), "DREAMER_MIN_FREE_MB": "0"}
    assert run(tmp_path, "ingest", "c.jsonl", "--user", "alice", env=data).returncode == 0
    fill(small_disk)
    proc = run(tmp_path, *args, env=data)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)  # not -7: no bus error
    assert_one_error_line(proc)
    assert f"below the hard floor of {HARD_FLOOR_MB} MB" in proc.stderr
    assert not (small_disk / "data" / "index").exists()


def test_a_read_on_a_really_full_disk_fails_in_one_line(tmp_path, small_disk):
    write_chat(tmp_path / "c.jsonl", *[("user", "I prefer green tea."), ("assistant", "ok")] * 4)
    data = {"DREAMER_DATA_DIR": str(small_disk / "data"), "DREAMER_MIN_FREE_MB": "0"}
    assert run(tmp_path, "ingest", "c.jsonl", "--user", "alice", env=data).returncode == 0
    fill(small_disk)
    proc = run(tmp_path, "status", env=data)
    assert proc.returncode == 1
    assert_one_error_line(proc)
    assert proc.stderr.startswith("error: cannot reach database sqlite:") and "disk I/O error" in proc.stderr
