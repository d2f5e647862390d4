"""The README's promises: two quick-start lines, CI runs the second, every setting documented; the
glossary of the house words; and ARCHITECTURE.md's table of where to change what, a row per folder."""

import re
import subprocess
from pathlib import Path

from dreamer.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
HOUSE_WORDS = (
    "cabinet",
    "workbench",
    "ledger",
    "book",
    "tally",
    "pace",
    "hold",
    "round",
    "offload",
    "scope",
    "topic",
    "supersede",
    "candidate",
    "verified",
    "review_required",
    "changeset",
    "lease",
    "outbox",
)


def quick_start() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = section.split("```", 2)[1]
    return [ln for ln in block.splitlines() if ln.strip()]


def test_quick_start_has_two_lines_demo_then_tests():
    lines = quick_start()
    assert len(lines) == 2
    assert lines[0].endswith("dreamer demo")
    assert lines[1].endswith("pytest")
    assert "pip install" in lines[0] and "pip install" in lines[1]


def test_ci_runs_the_second_line_with_services_required():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "DREAMER_REQUIRE_SERVICES=1" in ci
    extracted = subprocess.run(
        [
            "bash",
            "-c",
            "awk '/^## Quick start/{f=1;next} f&&/^```/{c++; if(c==2) exit; next} f&&c==1&&NF{print}' README.md | sed -n 2p",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert extracted == quick_start()[1]
    assert "awk '/^## Quick start/" in ci


def test_every_setting_is_documented():
    text = (ROOT / "README.md").read_text()
    documented = set(re.findall(r"`(DREAMER_[A-Z0-9_]+)`", text))
    expected = {f"DREAMER_{name.upper()}" for name in Settings.model_fields}
    assert expected - documented == set()


def test_the_glossary_defines_each_house_word():
    glossary = (DOCS / "glossary.md").read_text()
    terms = {
        t.strip().lower() for line in re.findall(r"^\*\*([^*]+)\*\*:", glossary, flags=re.M) for t in line.split(",")
    }
    assert [w for w in HOUSE_WORDS if w not in terms] == []


def test_architecture_has_a_row_for_every_package_folder():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    table = text.split("## Where to change what", 1)[1].split("\n## ", 1)[0]
    rows = set(re.findall(r"^\| `([^`]+)/` \|", table, flags=re.M))
    folders = {
        str(p.parent.relative_to(ROOT)) for pkg in ("dreamer", "workers") for p in (ROOT / pkg).rglob("__init__.py")
    }
    assert sorted(folders - rows) == []
    assert sorted(r for r in rows if not (ROOT / r).is_dir()) == []
