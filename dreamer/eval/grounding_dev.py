"""`dreamer eval grounding`: the grounding contract held to items a real model wrote, labelled
by hand. Each record of the file is one extraction call: the lines it showed and the items the
model wrote, each labelled `grounded` (all it states was said in its session) or not. Every item
is checked as a pass checks it (`extraction.grounding.ground`: the contract, then similarity with
the configured embedder), in a fresh data dir of its own; the figures are what the contract kept
against the labels: false accepts (kept, labelled not grounded) and false rejections (refused,
labelled grounded), and the refused items by kind of reason."""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from dreamer.core.errors import ConfigError, validation_summary
from dreamer.core.settings import Settings
from dreamer.core.trust.grounding import ROLES, reason_kind
from dreamer.engine.extraction.extract import Candidate
from dreamer.engine.extraction.grounding import ground
from dreamer.engine.extraction.transcript import Line
from dreamer.engine.runtime import Runtime
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle


class ShownLine(BaseModel):
    seq: int
    speaker: str = Field(description="a person's name, or the role user, assistant or tool")
    text: str
    day: date | None = None


class Labelled(BaseModel):
    text: str
    seqs: list[int]
    grounded: bool = Field(description="by hand: all it states was said in its session")
    note: str = ""


class Call(BaseModel):
    file: str
    session: str
    mode: str = "agent"
    lines: list[ShownLine]
    items: list[Labelled]


@dataclass
class GroundingFigures:
    """What the contract made of the labelled items."""

    items: int = 0
    labelled_grounded: int = 0
    kept: int = 0
    false_accepts: list[str] = field(default_factory=list)
    false_rejections: list[dict[str, str]] = field(default_factory=list)
    rejected: dict[str, int] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "labelled_grounded": self.labelled_grounded,
            "kept": self.kept,
            "false_accepts": self.false_accepts,
            "false_rejections": self.false_rejections,
            "rejected": dict(sorted(self.rejected.items(), key=lambda kv: -kv[1])),
        }


def load_calls(path: Path) -> list[Call]:
    """The labelled calls of `path`, or `ConfigError` naming what is wrong with it."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, list):
        raise ConfigError(f"{path}: a JSON list of labelled calls is expected")
    try:
        return [Call.model_validate(item) for item in data]
    except ValidationError as exc:
        raise ConfigError(f"{path}: {validation_summary(exc)}") from exc


def eval_grounding(settings: Settings, path: Path) -> dict[str, Any]:
    """The figures of the contract on the labelled calls of `path` (`GroundingFigures.as_json`)."""
    calls = load_calls(path)
    work = Path(tempfile.mkdtemp(prefix="dreamer-eval-grounding-"))
    try:
        st = settings.model_copy(update={"data_dir": work, "database_url": "", "qdrant_url": "", "llm_base_url": ""})
        engine = db.make_engine(st.resolved_database_url())
        db.upgrade(engine)
        figures = GroundingFigures()
        with Runtime.open(st, engine=engine, busy=AlwaysIdle()) as rt:
            for call in calls:
                _tally(figures, call, _verdicts(rt, call))
        engine.dispose()
        return figures.as_json()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _verdicts(rt: Runtime, call: Call) -> list[str | None]:
    """Each item's reason for refusal (None: kept), as a pass checks the items of one call."""
    lines = [
        Line(
            ln.seq,
            ln.speaker if ln.speaker in ROLES else "user",
            None if ln.speaker in ROLES else ln.speaker,
            ln.text,
            day=ln.day,
        )
        for ln in call.lines
    ]
    shown = {ln.seq for ln in lines}
    shared = [
        (0, Candidate(kind="profile", text=i.text, seqs=[s for s in i.seqs if s in shown], importance=0.5))
        for i in call.items
    ]
    return [cand.ungrounded for _, cand in ground(rt, "dev", shared, {0: lines})]


def _tally(figures: GroundingFigures, call: Call, reasons: list[str | None]) -> None:
    for item, reason in zip(call.items, reasons):
        figures.items += 1
        figures.labelled_grounded += item.grounded
        if reason is None:
            figures.kept += 1
            if not item.grounded:
                figures.false_accepts.append(item.text)
            continue
        kind = reason_kind(reason)
        figures.rejected[kind] = figures.rejected.get(kind, 0) + 1
        if item.grounded:
            figures.false_rejections.append({"text": item.text, "reason": reason})
