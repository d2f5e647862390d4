"""The CLI run as a user runs it: a subprocess on a data dir of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def run(tmp_path, *args, env=None, input=None, timeout=120):
    e = {
        **os.environ,
        "DREAMER_DATA_DIR": str(tmp_path / "data"),
        "DREAMER_EMBEDDER": "none",
        "DREAMER_LLM_BASE_URL": "",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "dreamer", *args],
        capture_output=True,
        text=True,
        env=e,
        cwd=tmp_path,
        input=input,
        timeout=timeout,
    )


def write_chat(path, *pairs):
    path.write_text("".join(json.dumps({"role": r, "content": c}) + "\n" for r, c in pairs))


def assert_one_error_line(proc):
    assert proc.returncode != 0
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
