"""What a user meets first: help that reads plainly and comes without loading the heavy parts."""

from __future__ import annotations

import json
import subprocess
import sys

from clikit import run

HEAVY = ("torch", "sqlalchemy", "sqlmodel", "qdrant_client", "openai", "pydantic_settings", "pydantic")


def loaded_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    """The heavy modules loaded once `code` ran in a fresh interpreter."""
    probe = f"{code}\nimport sys\nprint([m for m in {heavy!r} if m in sys.modules])"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_importing_the_cli_loads_no_heavy_module():
    assert loaded_after("import dreamer.cli") == []


def test_a_command_help_page_loads_no_heavy_module():
    code = (
        "import sys\nfrom dreamer.cli import main\nsys.argv = ['dreamer', 'memories', 'ls', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code, HEAVY[:-1]) == []  # typer itself reads a command's options with pydantic


def test_option_help_names_values_not_python_types(tmp_path):
    proc = run(tmp_path, "memories", "ls", "--help")
    assert proc.returncode == 0, proc.stderr
    lines = [ln.split()[:2] for ln in proc.stdout.splitlines() if ln.strip().startswith("--")]
    assert lines[:4] == [["--user", "USER"], ["--kind", "KIND"], ["--status", "STATUS"], ["--limit", "N"]]
    assert "<str>" not in proc.stdout and "<bool>" not in proc.stdout and "<int" not in proc.stdout
    assert not (tmp_path / "data").exists()


def test_bench_cli_times_the_help_page(tmp_path):
    proc = run(tmp_path, "bench", "cli", "--small", "--json", "-")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["bench"], result["command"], result["runs"]) == ("cli", "dreamer --help", 3)
    assert 0 < result["min_ms"] <= result["p50_ms"] <= result["max_ms"]


def test_argument_help_names_the_argument_not_its_python_type(tmp_path):
    proc = run(tmp_path, "recall", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "recall [OPTIONS] {QUERY}\n" in proc.stdout
    rows = proc.stdout.split("Arguments:")[1].split("Options:")[0].split()
    assert rows[:4] == ["QUERY", "What", "to", "look"]
    assert "<str>" not in proc.stdout
