"""`dreamer eval experience`: replay scenarios of code work through the public API (`CodeBook`,
`change`, `search`) on an empty store each, and score lifecycle, retrieval and propagation.

A scenario is `{"name", "project", "branch", "steps": [...]}`; the ops are `state`,
`experience`, `verify`, `counterexample`, `confirm`, `change`, `expect` and `search` (see
docs/code-work.md). Any step may carry `project` and `branch`.

* lifecycle accuracy: the share of `expect` steps whose id has the expected status;
* retrieval: hit@3, the share of searches with every `expect` id in the top 3, and
  `forbidden_returned`, how many `forbid` ids came back at all;
* propagation: the share of `change` steps whose demoted set is exactly the transitive
  dependents of the target, computed here from the scenario's own steps (or the step's
  `expect_demoted` list when it gives one).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dreamer.core.errors import ConfigError, DreamerError
from dreamer.embed.embedders import Embedder
from dreamer.engine.code_work.book import CodeBook, EntryInput, StateInput
from dreamer.engine.code_work.changes import change
from dreamer.engine.code_work.search import search
from dreamer.engine.code_work.tasks import FINDING_KEYS
from dreamer.store import db
from dreamer.store.experience import Where

OPS = ("state", "experience", "verify", "counterexample", "confirm", "change", "expect", "search")
USER = "eval"
TOP = 3


def load_scenarios(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a readable JSON scenario file ({exc})") from exc
    scenarios = data.get("scenarios") if isinstance(data, dict) else None
    if not isinstance(scenarios, list) or not all(isinstance(s, dict) for s in scenarios):
        raise ConfigError(f'{path}: expected {{"scenarios": [...]}} with one object per scenario')
    for sc in scenarios:
        steps = sc.get("steps")
        if not isinstance(steps, list) or not all(isinstance(st, dict) and st.get("op") in OPS for st in steps):
            raise ConfigError(f"{path}: scenario {sc.get('name')!r}: every step needs an op among {', '.join(OPS)}")
    return scenarios


@dataclass
class Node:
    """What the replay knows of an id, to compute the expected dependents independently."""

    kind: str
    db_id: str
    unit: str | None
    depends_on: list[str]
    libraries: list[str]
    where: Where


@dataclass
class ReplayScore:
    """How the replayed scenarios scored so far: the expectations, searches and changes checked, and the misses."""

    expects: int = 0
    expects_right: int = 0
    searches: int = 0
    hits: int = 0
    forbidden: int = 0
    changes: int = 0
    exact: int = 0
    misses: list[dict[str, Any]] = field(default_factory=list)

    def failed(self, op: str) -> None:
        """A scored step that could not run counts as scored and wrong."""
        if op == "expect":
            self.expects += 1
        elif op == "search":
            self.searches += 1
        elif op == "change":
            self.changes += 1


def expected_dependents(target: str, ids: dict[str, Node], where: Where, depth: int) -> set[str]:
    """The scenario ids a change of `target` should reach (the rules of the issue, read directly)."""
    kind, _, name = target.partition(":")
    local = {k: n for k, n in ids.items() if n.where == where}
    out: set[str] = set()
    targets, level = {target}, 0
    while targets and level < depth:
        level += 1
        hit = {
            k
            for k, n in local.items()
            if k not in out
            and (
                any(t in n.depends_on for t in targets)
                or (kind == "version" and level == 1 and n.kind == "entry" and name in n.libraries)
            )
        }
        out |= hit
        targets = {f"unit:{local[k].unit}" for k in hit if local[k].kind == "state" and local[k].unit}
    return out


class Replay:
    """One scenario on an empty store."""

    def __init__(
        self, scenario: dict[str, Any], book: CodeBook, score: ReplayScore, embedder: Embedder | None = None
    ) -> None:
        self.sc, self.book, self.score, self.embedder = scenario, book, score, embedder
        self.ids: dict[str, Node] = {}

    def where(self, step: dict[str, Any]) -> Where:
        return Where(
            USER,
            str(step.get("project") or self.sc.get("project") or "default"),
            str(step.get("branch") or self.sc.get("branch") or "main"),
        )

    def node(self, key: str) -> Node:
        if key not in self.ids:
            raise ConfigError(f"no earlier step made {key}")
        return self.ids[key]

    def run(self) -> None:
        for i, step in enumerate(self.sc["steps"]):
            try:
                getattr(self, f"op_{step['op']}")(step)
            except (DreamerError, KeyError, TypeError, ValueError) as exc:
                self.score.misses.append(
                    {"scenario": self.sc.get("name"), "step": i, "op": step["op"], "error": str(exc)}
                )
                self.score.failed(step["op"])

    def op_state(self, st: dict[str, Any]) -> None:
        given = StateInput(
            st["unit"],
            st.get("field") or st["id"],
            st.get("value"),
            st.get("status", "in_progress"),
            st.get("evidence") or {},
            st.get("depends_on") or [],
            st.get("by"),
        )
        row = self.book.set_state(self.where(st), given)
        self.ids[st["id"]] = Node("state", row.id, row.unit, list(row.depends_on), [], self.where(st))

    def op_experience(self, st: dict[str, Any]) -> None:
        keys = ("unit", "task", *FINDING_KEYS)
        fields = {k: st[k] for k in keys if st.get(k) is not None}
        if isinstance(st.get("contract"), dict):  # a contract's names are exact keywords of the entry
            fields["keywords"] = [*fields.get("keywords", []), *contract_names(st["contract"])]
        row = self.book.add_entry(self.where(st), EntryInput(**fields))
        self.ids[st["id"]] = Node("entry", row.id, row.unit, list(row.depends_on), list(row.versions), self.where(st))

    def op_verify(self, st: dict[str, Any]) -> None:
        node, result = self.node(st["id"]), st.get("result", "passed")
        if node.kind == "state":
            self.book.check_state(USER, node.db_id, result, st.get("command"))
        else:
            self.book.verify(USER, node.db_id, st["unit"], result, st.get("task"))

    def op_counterexample(self, st: dict[str, Any]) -> None:
        self.book.counterexample(USER, self.node(st["id"]).db_id, st["text"], st.get("unit"), st.get("task"))

    def op_confirm(self, st: dict[str, Any]) -> None:
        self.book.confirm(USER, self.node(st["id"]).db_id, st.get("by") or "reviewer")

    def op_change(self, st: dict[str, Any]) -> None:
        where = self.where(st)
        demoted = change(self.book, where, st["target"], st.get("value"))
        back = {n.db_id: k for k, n in self.ids.items()}
        got = {back.get(d.id, d.id) for d in demoted}
        given = st.get("expect_demoted", st.get("expect"))
        if isinstance(given, list):
            want = set(given)
        else:
            want = expected_dependents(st["target"], self.ids, where, self.book.depth)
        self.score.changes += 1
        if got == want:
            self.score.exact += 1
        else:
            self.score.misses.append(
                {
                    "scenario": self.sc.get("name"),
                    "op": "change",
                    "target": st["target"],
                    "missing": sorted(want - got),
                    "extra": sorted(got - want),
                }
            )

    def op_expect(self, st: dict[str, Any]) -> None:
        from dreamer.store import experience as rows
        from dreamer.store.db import session_scope

        node = self.node(st["id"])
        with session_scope(self.book.engine) as s:
            row = rows.entry(s, USER, node.db_id) if node.kind == "entry" else rows.state(s, USER, node.db_id)
            status = row.status
        self.score.expects += 1
        if status == st["status"]:
            self.score.expects_right += 1
        else:
            self.score.misses.append(
                {"scenario": self.sc.get("name"), "op": "expect", "id": st["id"], "want": st["status"], "got": status}
            )

    def op_search(self, st: dict[str, Any]) -> None:
        found = search(
            self.book,
            self.where(st),
            st["query"],
            unit=st.get("unit"),
            versions=st.get("versions"),
            embedder=self.embedder,
        )
        back = {n.db_id: k for k, n in self.ids.items()}
        got = [back.get(e["id"], e["id"]) for e in found["entries"]]
        want, forbid = list(st.get("expect") or []), set(st.get("forbid") or [])
        self.score.searches += 1
        hit = all(k in got[:TOP] for k in want)
        bad = sorted(forbid & set(got))
        self.score.hits += hit
        self.score.forbidden += len(bad)
        if not hit or bad:
            self.score.misses.append(
                {
                    "scenario": self.sc.get("name"),
                    "op": "search",
                    "query": st["query"],
                    "want": want,
                    "got": got,
                    "forbidden": bad,
                }
            )


def _name(embedder: Embedder | None) -> str | None:
    inner = getattr(embedder, "inner", embedder)
    return type(inner).__name__ if inner is not None else None


def contract_names(contract: dict[str, Any]) -> list[str]:
    """The names a contract lists ({"props": ["columns"], "events": ["change"]}), flattened."""
    out: list[str] = []
    for value in contract.values():
        items = value if isinstance(value, list) else [value]
        out += [str(v) for v in items if isinstance(v, str | int)]
    return out


def share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def run_experience(
    path: Path, depth: int, on_scenario: Callable[[str], None] | None = None, embedder: Embedder | None = None
) -> dict[str, Any]:
    """Replay every scenario of `path` (each on an empty SQLite store) and score them; searches
    use `embedder` for meaning when one is given."""
    scenarios = load_scenarios(path)
    score = ReplayScore()
    with tempfile.TemporaryDirectory(prefix="dreamer-experience-") as tmp:
        for i, sc in enumerate(scenarios):
            engine = db.make_engine(f"sqlite:///{Path(tmp) / f'scenario-{i}.db'}")
            try:
                db.upgrade(engine)
                Replay(sc, CodeBook(engine, depth=depth), score, embedder).run()
            finally:
                engine.dispose()
            if on_scenario:
                on_scenario(str(sc.get("name") or i))
    return {
        "scenarios": len(scenarios),
        "embedder": _name(embedder),
        "lifecycle_accuracy": share(score.expects_right, score.expects),
        "expects": score.expects,
        "retrieval": {
            "searches": score.searches,
            "hit_at_3": share(score.hits, score.searches),
            "forbidden_returned": score.forbidden,
        },
        "propagation": {"changes": score.changes, "exact": share(score.exact, score.changes)},
        "misses": score.misses,
    }
