"""The house rules a reader relies on: short modules, short functions, a layer per package."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dreamer", "workers")
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50
LAYERS = ("core", "store", "index", "embed", "llm", "client", "providers", "ingest", "engine", "online", "eval", "cli")


def sources() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_the_tree_is_found():
    assert len(sources()) > 40


def test_no_module_is_over_the_limit():
    long = [
        f"{p.relative_to(ROOT)} ({n} lines)"
        for p in sources()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert long == []


def test_no_function_is_over_the_limit():
    assert [f for p in sources() for f in long_functions(p)] == []


def test_each_layer_is_a_package_and_nothing_else_sits_at_the_top():
    top = {p.name for p in (ROOT / "dreamer").iterdir() if not p.name.startswith((".", "__pycache__"))}
    assert top == {*LAYERS, "__init__.py", "__main__.py", "examples"}
    assert all((ROOT / "dreamer" / layer / "__init__.py").is_file() for layer in LAYERS)


def test_architecture_names_every_layer():
    text = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert all(f"dreamer/{layer}" in text for layer in LAYERS)


MAX_FOLDER_MODULES = 20


def packages() -> list[Path]:
    return sorted(p.parent for pkg in PACKAGES for p in (ROOT / pkg).rglob("__init__.py"))


def test_every_package_says_what_it_holds_and_what_it_may_import():
    silent = []
    for pkg in packages():
        doc = ast.get_docstring(ast.parse((pkg / "__init__.py").read_text(encoding="utf-8"))) or ""
        if not doc.strip():
            silent.append(str(pkg.relative_to(ROOT)))
    assert silent == []


def test_no_folder_holds_more_than_twenty_modules():
    crowded = {
        str(pkg.relative_to(ROOT)): n
        for pkg in packages()
        if (n := len([p for p in pkg.glob("*.py") if p.name != "__init__.py"])) > MAX_FOLDER_MODULES
    }
    assert crowded == {}


def module_imports(path: Path) -> set[str]:
    """The dreamer modules a module imports, at its top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dreamer"):
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("dreamer"))
    return found


def test_no_two_modules_import_each_other():
    """A package's `__init__` may gather its modules; two modules never lean on each other."""
    names = {".".join(p.relative_to(ROOT).with_suffix("").parts): p for p in sources() if p.name != "__init__.py"}
    graph = {name: module_imports(path) & set(names) for name, path in names.items()}
    pairs = sorted((a, b) for a, deps in graph.items() for b in deps if a < b and a in graph.get(b, set()) and b != a)
    assert pairs == []
