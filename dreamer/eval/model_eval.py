"""`dreamer eval model`: how the configured model does on a transcript file, as a pass sees it:
memories per session, the share of the items it wrote that were valid and grounded (the
grounding contract, `core.trust.grounding`), the rejected ones by reason, LLM tokens per
dialogue token (the endpoint's own usage) and seconds per session. The file is imported into
a fresh data dir of its own; each session is dreamed in its own pass, in order."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import col, select

from dreamer.core.errors import ConfigError
from dreamer.core.models import CURRENT_STATUSES, DreamRun, Memory, Message, Session
from dreamer.core.settings import Settings
from dreamer.core.tokens import count_tokens
from dreamer.core.trust.grounding import reason_kind
from dreamer.engine.dream import dream_pass
from dreamer.engine.runs import DROPPED, OVER_CAP, OnStep, PassStep
from dreamer.engine.runtime import Runtime
from dreamer.eval.harness import UNLIMITED
from dreamer.ingest.files import ingest_file
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope

UNGROUNDED = "ungrounded"


@dataclass
class ModelFigures:
    """The figures of one `eval model` run."""

    model: str
    base_url: str
    sessions: int = 0
    failed_sessions: int = 0
    dialogue_tokens: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    items: int = 0  # what the model wrote as items: read valid, or dropped from its reply
    valid: int = 0  # items that were valid candidates
    grounded: int = 0  # valid candidates that rested on what was said (the grounding contract)
    rejected: dict[str, int] = field(default_factory=dict)  # items not stored, by the kind of reason (`reason_kind`)
    memories: int = 0
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        per = max(self.sessions, 1)
        return {
            **asdict(self),
            "memories_per_session": round(self.memories / per, 3),
            "valid_share": round(self.valid / self.items, 3) if self.items else None,
            "grounded_share": round(self.grounded / self.valid, 3) if self.valid else None,
            "tokens_per_dialogue_token": round((self.prompt_tokens + self.completion_tokens) / self.dialogue_tokens, 4)
            if self.dialogue_tokens
            else None,
            "seconds_per_session": round(self.seconds / per, 2),
        }


def eval_model(
    settings: Settings,
    path: Path,
    *,
    fmt: str = "auto",
    user: str = "eval",
    sessions: int | None = None,
    on_session: Callable[[int, int], None] | None = None,
    on_step: OnStep | None = None,
) -> dict[str, Any]:
    """Import `path` into a fresh data dir, dream its first `sessions` sessions one pass each
    with the configured model, and return the figures (`ModelFigures.as_json`). `on_session` is
    told after each session, `on_step` after each session and model call, counting the whole run."""
    if not settings.llm_base_url:
        raise ConfigError("eval model needs a model: set DREAMER_LLM_BASE_URL (and DREAMER_LLM_MODEL)")
    work = Path(tempfile.mkdtemp(prefix="dreamer-eval-model-"))
    try:
        st = _settings(settings, work)
        engine = db.make_engine(st.resolved_database_url())
        db.upgrade(engine)
        ingest_file(engine, path, fmt=fmt, user_id=user, max_message_bytes=st.max_message_bytes)
        ids = _session_ids(engine)[:sessions]
        figures = ModelFigures(st.llm_model, st.llm_base_url, dialogue_tokens=_dialogue_tokens(engine, ids))
        with Runtime.open(st, engine=engine, busy=AlwaysIdle()) as rt:
            for n, sid in enumerate(ids, start=1):
                started = time.perf_counter()
                step = None if on_step is None else _whole(on_step, figures, n - 1, len(ids))
                _add(figures, dream_pass(rt, trigger="eval", session_ids=[sid], force=True, on_step=step))
                figures.seconds += time.perf_counter() - started
                if on_session is not None:
                    on_session(n, len(ids))
        figures.memories = _memories(engine)
        figures.seconds = round(figures.seconds, 2)
        engine.dispose()
        return figures.as_json()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _settings(settings: Settings, work: Path) -> Settings:
    """The caps meant for live agents lifted: every session due at once, all of it read."""
    return settings.model_copy(
        update={
            "data_dir": work,
            "database_url": "",
            "qdrant_url": "",
            "min_rounds": 0,
            "max_age_days": 100 * 365,
            "quiet_period_seconds": 0,
            "tokens_per_session_pass": UNLIMITED,
            "llm_pass_token_budget": UNLIMITED,
            "triage": False,
        }
    )


def _session_ids(engine: Any) -> list[int]:
    with session_scope(engine) as s:
        rows = s.exec(select(Session.id).order_by(col(Session.id))).all()
    return [sid for sid in rows if sid is not None]


def _dialogue_tokens(engine: Any, ids: list[int]) -> int:
    with session_scope(engine) as s:
        texts = s.exec(select(Message.content).where(col(Message.session_id).in_(ids))).all()
    return sum(count_tokens(t) for t in texts)


def _memories(engine: Any) -> int:
    with session_scope(engine) as s:
        return len(s.exec(select(Memory.id).where(col(Memory.status).in_(CURRENT_STATUSES))).all())


def _whole(on_step: OnStep, figures: ModelFigures, before: int, total: int) -> OnStep:
    """A pass's steps told as the whole run's: the sessions, calls and tokens of the passes before it added."""

    def step(at: PassStep) -> None:
        spent = figures.prompt_tokens + figures.completion_tokens
        on_step(PassStep(before + at.sessions, total, figures.llm_calls + at.calls, spent + at.tokens))

    return step


def _add(figures: ModelFigures, run: DreamRun) -> None:
    reasons = [str(r.get("reason", "")) for r in run.rejections or []]
    dropped = reasons.count(DROPPED)
    ungrounded = sum(1 for r in reasons if r.startswith(UNGROUNDED))
    over_cap = reasons.count(OVER_CAP)  # valid and grounded, past the per-session cap
    figures.sessions += run.sessions + run.failed_sessions
    figures.failed_sessions += run.failed_sessions
    figures.llm_calls += run.llm_calls
    figures.prompt_tokens += run.prompt_tokens
    figures.completion_tokens += run.completion_tokens
    figures.items += run.candidates + ungrounded + over_cap + dropped
    figures.valid += run.candidates + ungrounded + over_cap
    figures.grounded += run.candidates + over_cap
    for kind in map(reason_kind, reasons):
        figures.rejected[kind] = figures.rejected.get(kind, 0) + 1
