"""Count the lines of hand-written patterns in Python modules.

A line counts when it holds part of a regex literal (a string reaching an `re.*` call, directly
or through a module-level name) or part of a literal word collection (a set, list, tuple or dict
of three or more string words; not a dispatch table of functions, nor ``__all__``). Each line
counts once.

    python tools/pattern_lines.py FILE...            # files on disk
    python tools/pattern_lines.py --rev REV PATH...  # files as they were at a git revision
"""

from __future__ import annotations

import ast
import subprocess
import sys

_RE_CALLS = {"compile", "search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}


def _is_re_call(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in _RE_CALLS
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in {"re", "regex"}
    )


def _wrappers(tree: ast.Module) -> dict[str, tuple[int, str]]:
    """Module functions that hand a parameter to an `re.*` call (``_rx(pattern)``,
    ``_shape(name, rx)``): name -> (the parameter's position, its name)."""
    found: dict[str, tuple[int, str]] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        params = [a.arg for a in fn.args.args]
        for node in ast.walk(fn):
            if _is_re_call(node) and node.args:  # type: ignore[attr-defined]
                used = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}  # type: ignore[attr-defined]
                for i, param in enumerate(params):
                    if param in used:
                        found[fn.name] = (i, param)
    return found


def _pattern_args(node: ast.AST, wrappers: dict[str, tuple[int, str]]) -> list[ast.AST]:
    """The arguments of a call that are patterns: the first of an `re.*` call, the pattern
    parameter of a wrapper."""
    if not isinstance(node, ast.Call):
        return []
    if _is_re_call(node):
        return [*node.args[:1], *[k.value for k in node.keywords if k.arg == "pattern"]]
    if isinstance(node.func, ast.Name) and node.func.id in wrappers:
        index, name = wrappers[node.func.id]
        return [*node.args[index : index + 1], *[k.value for k in node.keywords if k.arg == name]]
    return []


def _names(tree: ast.Module) -> dict[str, list[ast.AST]]:
    names: dict[str, list[ast.AST]] = {}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    names.setdefault(target.id, []).append(stmt.value)
    return names


def _span(node: ast.AST) -> set[int]:
    end = getattr(node, "end_lineno", None) or node.lineno  # type: ignore[attr-defined]
    return set(range(node.lineno, end + 1))  # type: ignore[attr-defined]


def _word_collection(node: ast.AST) -> bool:
    """A literal collection of three or more words. A dict whose values are code (``{"word":
    word, "code": code}``) is a dispatch table: its keys name functions, they match nothing."""
    if isinstance(node, ast.Dict):
        if not any(isinstance(v, (ast.Constant, ast.Set, ast.List, ast.Tuple, ast.Dict)) for v in node.values):
            return False
        items = [k for k in node.keys if k is not None] + list(node.values)
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = list(node.elts)
    else:
        return False
    words = [i for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return len(words) >= 3 and len(words) * 2 >= len(items)


def _exported(node: ast.AST, tree: ast.Module) -> bool:
    """Whether `node` is the value of ``__all__`` (names of the module, not words)."""
    return any(
        isinstance(stmt, ast.Assign)
        and stmt.value is node
        and any(getattr(t, "id", "") == "__all__" for t in stmt.targets)
        for stmt in tree.body
    )


def _keys(node: ast.AST) -> set[int]:
    """The ids of string constants that name something rather than match it: a lookup key
    (``data["verbs"]``) or an argument of a call that is not a string method (``_alt("verbs")``)."""
    keys: set[int] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript):
            keys |= {id(n) for n in ast.walk(sub.slice) if isinstance(n, ast.Constant)}
        elif isinstance(sub, ast.Call) and not (
            isinstance(sub.func, ast.Attribute) and isinstance(sub.func.value, ast.Constant)
        ):
            keys |= {id(a) for a in [*sub.args, *(k.value for k in sub.keywords)] if isinstance(a, ast.Constant)}
    return keys


def _strings(node: ast.AST, names: dict[str, list[ast.AST]], seen: set[str]) -> list[ast.AST]:
    """The string constants in `node`, following names to their module-level values."""
    found: list[ast.AST] = []
    keys = _keys(node)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and id(sub) not in keys:
            found.append(sub)
        elif isinstance(sub, ast.Name) and sub.id in names and sub.id not in seen:
            seen.add(sub.id)
            for value in names[sub.id]:
                found.extend(_strings(value, names, seen))
    return found


def count(sources: dict[str, str]) -> dict[str, int]:
    """Pattern lines per file; a name imported from one of the other files is followed there."""
    trees = {path: ast.parse(source) for path, source in sources.items()}
    owner: dict[int, str] = {}  # id(value node) -> the file it is written in
    names: dict[str, list[ast.AST]] = {}
    for path, tree in trees.items():
        for name, values in _names(tree).items():
            names.setdefault(name, []).extend(values)
            owner.update({id(n): path for v in values for n in ast.walk(v)})
    lines: dict[str, set[int]] = {path: set() for path in trees}
    for path, tree in trees.items():
        wrappers = _wrappers(tree)
        for node in ast.walk(tree):
            for arg in _pattern_args(node, wrappers):
                for sub in _strings(arg, names, set()):
                    lines[owner.get(id(sub), path)] |= _span(sub)
            if _word_collection(node) and not _exported(node, tree):
                lines[path] |= _span(node)
    return {path: len(found) for path, found in lines.items()}


def main(argv: list[str]) -> int:
    rev = None
    if argv[:1] == ["--rev"]:
        rev, argv = argv[1], argv[2:]
    sources = {}
    for path in argv:
        if rev is None:
            with open(path, encoding="utf-8") as handle:
                sources[path] = handle.read()
        else:
            sources[path] = subprocess.run(
                ["git", "show", f"{rev}:{path}"], check=True, capture_output=True, text=True
            ).stdout
    counts = count(sources)
    for path, lines in counts.items():
        print(f"{lines:6d}  {path}")
    print(f"{sum(counts.values()):6d}  total")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
