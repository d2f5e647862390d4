"""The reliability suite reports figures: each test records what it measured with `figures`,
which prints it at once (visible with ``-s``) and again in a summary at the end of the run;
the figures are also written to ``reliability-figures.json`` in pytest's base temp folder."""

from __future__ import annotations

import json

import pytest

_RECORDED: list[dict] = []


class Figures:
    def __init__(self, test: str) -> None:
        self.test = test

    def __call__(self, name: str, value, note: str = "") -> None:
        _RECORDED.append({"test": self.test, "figure": name, "value": value, "note": note})
        print(f"[reliability] {name}: {value}{f'  ({note})' if note else ''}", flush=True)


@pytest.fixture
def figures(request) -> Figures:
    return Figures(request.node.nodeid)


@pytest.fixture(scope="session", autouse=True)
def _write_figures(tmp_path_factory):
    yield
    if _RECORDED:
        path = tmp_path_factory.getbasetemp() / "reliability-figures.json"
        path.write_text(json.dumps(_RECORDED, indent=2, default=str), encoding="utf-8")


def pytest_terminal_summary(terminalreporter):
    if not _RECORDED:
        return
    terminalreporter.section("reliability figures")
    for row in _RECORDED:
        note = f"  ({row['note']})" if row["note"] else ""
        terminalreporter.write_line(f"{row['figure']}: {row['value']}{note}")
