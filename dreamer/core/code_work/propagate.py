"""Which states and entries a change sends to review (pure).

A change of `file:PATH`, `interface:NAME` or `unit:NAME` reaches whatever `depends_on` it,
whatever its status; a change of `version:LIBRARY` reaches the entries whose `versions` hold
exactly that library key (and whatever `depends_on` it). Through `unit:X` it goes on to whatever
depends on a state of unit X it reached, transitively, at most `max_depth` steps from the change.
An entry's own unit is not a dependency: only states carry a change on to their unit.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dreamer.core.code_work.experience import parse_target


@dataclass(frozen=True)
class Node:
    """A state (`kind` "state") or an entry ("entry") as propagation sees it."""

    key: str
    kind: str
    unit: str | None
    depends_on: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()  # an entry's `versions` keys


@dataclass(frozen=True)
class Reached:
    key: str
    kind: str
    depth: int
    reason: str


def _direct(target: str, node: Node) -> bool:
    kind, name = parse_target(target)
    if target in node.depends_on:
        return True
    return kind == "version" and node.kind == "entry" and name in node.libraries


def dependents(target: str, nodes: Iterable[Node], max_depth: int, reason: str | None = None) -> list[Reached]:
    """Every node the change of `target` reaches, nearest first, each once with its reason
    (`reason` says what the change was; by default "TARGET changed")."""
    parse_target(target)
    pool = list(nodes)
    reached: dict[str, Reached] = {}
    frontier: list[tuple[str, str]] = [(target, reason or f"{target} changed")]
    seen_targets = {target}
    depth = 0
    while frontier and depth < max_depth:
        depth += 1
        following: list[tuple[str, str]] = []
        for changed, why in frontier:
            for node in pool:
                if node.key in reached or not _direct(changed, node):
                    continue
                reason = why if changed == target else f"depends on {changed}: {why}"
                reached[node.key] = Reached(node.key, node.kind, depth, reason)
                unit_target = f"unit:{node.unit}" if node.kind == "state" and node.unit else None
                if unit_target and unit_target not in seen_targets:
                    seen_targets.add(unit_target)
                    following.append((unit_target, reason))
        frontier = following
    return list(reached.values())
