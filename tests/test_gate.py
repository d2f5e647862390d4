"""The admission gate is the only writer of the columns whose text can be served (`GATED`).

Read from the package's source: a call that builds a gated table's row with a gated column (or
with ``**`` spread into it), an assignment to a gated column's name on any object, a ``setattr``
with a name not written out, and an ``insert``/``update`` of a gated table are each a write. Only
`dreamer/store/gate.py` may make them. Every text column of every table is either gated or named
in `NOT_SERVED` with why, so a new table is named here until it is gated.
"""

from __future__ import annotations

import ast
from pathlib import Path

from sqlalchemy import JSON, Text
from sqlmodel import SQLModel

import dreamer.core.models  # noqa: F401  (registers the tables)
from dreamer.store.gate import GATED

ROOT = Path(__file__).resolve().parents[1]
GATE = ROOT / "dreamer" / "store" / "gate.py"
MODELS = {
    "Memory": "memories",
    "DailyNote": "daily_notes",
    "Message": "messages",
    "ExperienceEntry": "experience_entries",
}
MODELS |= {"ProjectState": "project_states", "OffloadedBody": "offloaded_bodies"}
COLUMNS = frozenset().union(*GATED.values())

# Writes the reading above cannot tell from a gated one, each checked by hand, and why.
KNOWN = {
    "dreamer/engine/records/cascade.py assigns .evidence": "a memory's evidence: session references",
}
# Text columns no reader serves to a model as memory, and why.
NOT_SERVED: dict[str, str] = {
    "dream_runs.rejections": "a run's record for a person: candidates the pass refused, as redacted as its input",
    "dream_runs.error": "a run's note for a person",
    "cursors.last_error": "why a session failed, for a person",
    "scheduler_state.last_skip_reason": "why the scheduler skipped, for a person",
    "watched_files.path": "a watched file's path",
    "watched_files.problem": "why a watched file was not read, for a person",
    "memories.evidence": "session ids and message ranges, and why a memory is untrusted",
    "memories.tags": "a team memory's tag (decision, lesson, expertise, context)",
    "memory_events.reason": "history for a person; a text change is recorded as the gate stored it",
    "memory_events.data": "history for a person; a text change is recorded as the gate stored it",
    "messages.meta": "a message's metadata (source, times)",
    "experience_entries.source_tasks": "task ids",
    "experience_entries.verified_units": "unit names",
    "experience_entries.versions": "version numbers",
    "experience_entries.depends_on": "ids of states and entries",
    "experience_entries.reason": "why an entry has its status, said by dreamer",
    "experience_events.reason": "history for a person, said by dreamer",
    "experience_events.data": "history for a person",
    "project_states.depends_on": "ids of states and entries",
    "project_states.reason": "why a state has its status, said by dreamer",
    "provider_breakers.reason": "why the provider's breaker opened, for a person",
    "provider_breakers.changes": "the breaker's recent changes, for a person",
}


def _gated_call(node: ast.Call) -> bool:
    name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
    if name not in MODELS:
        return False
    fields = GATED[MODELS[name]]
    return any(k.arg is None or k.arg in fields for k in node.keywords)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found: list[ast.expr] = []
        for t in node.targets:
            found += list(t.elts) if isinstance(t, ast.Tuple) else [t]
        return found
    if isinstance(node, ast.AugAssign | ast.AnnAssign):
        return [node.target]
    return []


def _statement_of(node: ast.AST) -> str | None:
    """The gated model an ``insert(Model)`` or ``update(Model)`` names, else None."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"insert", "update"}:
        arg = node.args[0] if node.args else None
        base = arg.value if isinstance(arg, ast.Attribute) else arg
        if isinstance(base, ast.Name) and base.id in MODELS:
            return base.id
    return None


def _plain_values(node: ast.AST) -> ast.AST | None:
    """The statement of ``insert/update(Model).values(k=...)`` when no key is a gated column."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "values":
        receiver = node.func.value
        while (
            isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute) and not _statement_of(receiver)
        ):
            receiver = receiver.func.value  # .where(...) between the statement and its values
        model = _statement_of(receiver)
        if model and not node.args and all(k.arg and k.arg not in GATED[MODELS[model]] for k in node.keywords):
            return receiver
    return None


def _writes(node: ast.AST, plain: set[int], named: set[str]) -> str | None:
    if isinstance(node, ast.Call) and _gated_call(node):
        return "builds a gated row"
    if (model := _statement_of(node)) and id(node) not in plain:
        return f"writes {model} rows"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and name.value not in COLUMNS):
            return "setattr with a column that may be gated"
    for t in _targets(node):
        if (
            isinstance(t, ast.Attribute)
            and t.attr in named
            and not (isinstance(t.value, ast.Name) and t.value.id == "self")
        ):
            return f"assigns .{t.attr}"
    return None


def _named_columns(tree: ast.AST) -> set[str]:
    """The gated columns of the gated models a module names: the attributes it may not assign."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    return set().union(*(GATED[table] for model, table in MODELS.items() if model in names))


def ungated_writes() -> list[str]:
    found = []
    for path in sorted((ROOT / "dreamer").rglob("*.py")):
        if path == GATE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        plain = {id(s) for n in ast.walk(tree) if (s := _plain_values(n)) is not None}
        named = _named_columns(tree)
        for node in ast.walk(tree):
            why = _writes(node, plain, named)
            if why and f"{path.relative_to(ROOT)} {why}" not in KNOWN:
                found.append(f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)} {why}")
    return found


def test_no_module_but_the_gate_writes_a_gated_column():
    assert ungated_writes() == []


def test_every_text_column_is_gated_or_said_not_served():
    loose = []
    for table in SQLModel.metadata.sorted_tables:
        for column in table.columns:
            if not isinstance(column.type, Text | JSON) or column.primary_key or column.foreign_keys:
                continue
            key = f"{table.name}.{column.name}"
            if column.name not in GATED.get(table.name, ()) and key not in NOT_SERVED:
                loose.append(key)
    assert loose == []
