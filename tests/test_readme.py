"""The README's promises: two quick-start lines, CI runs the second, a short entry point whose
links hold, and docs that document every setting, name only paths that exist and define the
house words."""

import re
import subprocess
from pathlib import Path

from dreamer.core.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MAX_README_LINES = 200
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
LAYERS = ("core", "store", "index", "embed", "llm", "client", "providers", "ingest", "engine", "online", "eval", "cli")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def quick_start() -> list[str]:
    text = README.read_text()
    section = text.split("## Quick start", 1)[1]
    block = section.split("```", 2)[1]
    return [ln for ln in block.splitlines() if ln.strip()]


def pages() -> list[Path]:
    """The README and every docs page: together they are the documentation."""
    return [README, *sorted(DOCS.glob("*.md"))]


def documentation() -> str:
    return "\n".join(p.read_text() for p in pages())


def local_links(page: Path) -> list[tuple[Path, str]]:
    """The links of `page` to files of this repository, as (file, anchor)."""
    out = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        out.append(((page.parent / path).resolve() if path else page, anchor))
    return out


def anchors(page: Path) -> set[str]:
    """The anchors of `page`'s headings, as GitHub makes them."""
    found = set()
    for heading in re.findall(r"^#+ (.+)$", page.read_text(), flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower())
        found.add(slug.replace(" ", "-"))
    return found


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
    documented = set(re.findall(r"`(DREAMER_[A-Z0-9_]+)`", documentation()))
    expected = {f"DREAMER_{name.upper()}" for name in Settings.model_fields}
    assert expected - documented == set()


def test_the_readme_is_an_entry_point_of_at_most_200_lines():
    assert len(README.read_text().splitlines()) <= MAX_README_LINES


def test_the_readme_links_every_docs_page_and_each_exists():
    linked = {path for path, _ in local_links(README) if DOCS in path.parents}
    assert linked, "the README links no docs page"
    assert [str(p.relative_to(ROOT)) for p in sorted(linked) if not p.is_file()] == []
    unlinked = [str(p.relative_to(ROOT)) for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert unlinked == []


def test_the_readme_shows_the_picture():
    assert "](docs/inspector.png)" in README.read_text()
    assert (DOCS / "inspector.png").is_file()


def test_every_link_between_the_pages_holds():
    broken = []
    for page in [*pages(), ROOT / "ARCHITECTURE.md"]:
        for path, anchor in local_links(page):
            if not path.exists() or (anchor and path.suffix == ".md" and anchor not in anchors(path)):
                broken.append(f"{page.relative_to(ROOT)} -> {path.relative_to(ROOT)}#{anchor}")
    assert broken == []


def test_every_path_the_docs_name_exists():
    """A module moved or renamed is a stale sentence somewhere: every `dreamer/…`, `workers/…` or
    `tests/…` path in backticks names a file or folder that is there (a `*` globs), and so does
    every module named by its layer (`engine/due`, `core/trust/steering`)."""
    missing = []
    for page in [*pages(), ROOT / "ARCHITECTURE.md"]:
        text = page.read_text()
        for path in re.findall(r"`((?:dreamer|workers|tests)/[^`\s]*)`", text):
            if not (any(ROOT.glob(path)) if "*" in path else (ROOT / path).exists()):
                missing.append(f"{page.relative_to(ROOT)}: {path}")
        for module in re.findall(rf"`((?:{'|'.join(LAYERS)})/[\w/]+)`", text):
            where = ROOT / "dreamer" / module.rstrip("/")
            if not (where.is_dir() or where.with_suffix(".py").is_file()):
                missing.append(f"{page.relative_to(ROOT)}: {module}")
    assert missing == []


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
