"""The LoCoMo harness: each conversation goes through the real pipeline in a fresh data directory.

``observations``: the LoCoMo importer, then the real dream pass, its extraction answered over
HTTP by a replay of the conversation's own observations (the scripted OpenAI-compatible server,
the real `openai` client), so validation, consolidation, the index and recall are production's.
``turns``: every stored turn becomes a memory directly, as a flush-everything system would keep.
Then every question is recalled in its conversation's scope and scored on evidence dia_ids.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from dreamer.core.errors import ConfigError, os_reason
from dreamer.core.models import CURRENT_STATUSES, DreamRun, Memory, Message, Session
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import clean_for_model
from dreamer.core.settings import Settings
from dreamer.core.tokens import count_tokens
from dreamer.embed.embedders import Embedder, build_embedder
from dreamer.engine import outbox
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.dream import dream_pass
from dreamer.engine.markdown.views import safe_name
from dreamer.engine.runtime import Runtime
from dreamer.eval.locomo import (
    Conversation,
    DiaMap,
    Scored,
    aggregate,
    load_conversations,
    score_question,
    session_external_id,
)
from dreamer.eval.locomo_replay import ObservationReplay
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.files import ingest_file
from dreamer.llm.client import build_llm
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.recall import recall
from dreamer.store import cabinet, db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

Turns = dict[str, list[tuple[int, str]]]  # each session's (seq, text) as the model sees it, by external id

MemoryMode = Literal["observations", "turns"]
UNLIMITED = 10**9
TURN_KIND = "daily_note"
SCRIPTED_WINDOW = 128_000  # the replayed model stands for a hosted one with a large window


@dataclass
class EvalOptions:
    path: Path
    memories: MemoryMode = "observations"
    search: str = "hybrid"
    ks: Sequence[int] = (5, 10)
    conversations: Sequence[str] | None = None
    work_dir: Path | None = None  # kept for inspection when given; a temp folder otherwise


@dataclass
class Tokens:
    """What the dream passes of an eval spent on the model."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, run: DreamRun) -> None:
        self.llm_calls += run.llm_calls
        self.prompt_tokens += run.prompt_tokens
        self.completion_tokens += run.completion_tokens


@dataclass
class Totals(Tokens):
    memories: int = 0
    dialogue_tokens: int = 0
    rows: list[Scored] = field(default_factory=list)


def eval_settings(settings: Settings, data_dir: Path, search: str) -> Settings:
    """A conversation's settings: its own data dir, embedded stores, and the caps meant for live
    agents lifted (every session is due at once and all of it is read, kept and extracted)."""
    return settings.model_copy(
        update={
            "data_dir": data_dir,
            "database_url": "",
            "qdrant_url": "",
            "llm_base_url": "",
            "entries_per_session": 1000,
            "tokens_per_session_pass": UNLIMITED,
            "max_sessions_per_pass": UNLIMITED,
            "min_rounds": 0,
            "triage": False,
            "max_age_days": 100 * 365,
            "quiet_period_seconds": 0,
            "llm_pass_token_budget": UNLIMITED,
            "recall_search": search,
            "timezone": "UTC",  # LoCoMo's times are read as UTC: its days stay its own
        }
    )


def run_locomo(settings: Settings, opts: EvalOptions) -> dict[str, Any]:
    """Evaluate every selected conversation; the result has exactly the documented keys."""
    started = time.perf_counter()
    conversations = load_conversations(opts.path, opts.conversations)
    if opts.work_dir is not None:
        prepare_work_dir(opts.work_dir)
    embedder = build_embedder(settings)
    totals = Totals()
    with ExitStack() as stack:
        root = opts.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dreamer-eval-")))
        for conv in conversations:
            log.info("evaluating %s (%d questions)", conv.sample_id, len(conv.questions))
            evaluate_conversation(settings, conv, opts, embedder, conversation_dir(root, conv.sample_id), totals)
    return result_json(totals, opts.ks, time.perf_counter() - started)


def conversation_dir(root: Path, sample_id: str) -> Path:
    """The conversation's own folder: a direct child of `root`, never "." or "..", and distinct
    for distinct sample_ids (`safe_name`: a slug plus 12 hex of the id's sha256)."""
    return root / safe_name(sample_id)


def prepare_work_dir(work_dir: Path) -> None:
    """The --work-dir folder exists (made when missing) and is writable, or `ConfigError`."""
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError as exc:
        raise ConfigError(f"work dir {work_dir} is not a folder") from exc
    except OSError as exc:
        raise ConfigError(f"work dir {work_dir} cannot be made: {os_reason(exc)}") from exc
    if not os.access(work_dir, os.W_OK | os.X_OK):
        raise ConfigError(f"work dir {work_dir} is not writable")


def fresh_dir(data_dir: Path) -> None:
    """An empty `data_dir`: a folder left by an earlier run is removed; anything else there is
    refused rather than deleted."""
    if data_dir.is_symlink() or (data_dir.exists() and not data_dir.is_dir()):
        raise ConfigError(f"{data_dir} exists and is not a conversation folder: move it away")
    if data_dir.exists():
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)


def result_json(totals: Totals, ks: Sequence[int], seconds: float) -> dict[str, Any]:
    scores = aggregate(totals.rows, ks)
    spent = totals.prompt_tokens + totals.completion_tokens
    return {
        "n_questions": scores["n_questions"],
        "recall_at": scores["recall_at"],
        "hit_at": scores["hit_at"],
        "by_category": scores["by_category"],
        "evidence_ceiling": scores["evidence_ceiling"],
        "memories": totals.memories,
        "llm_calls": totals.llm_calls,
        "prompt_tokens": totals.prompt_tokens,
        "completion_tokens": totals.completion_tokens,
        "dialogue_tokens": totals.dialogue_tokens,
        "tokens_per_dialogue_token": round(spent / totals.dialogue_tokens, 4) if totals.dialogue_tokens else 0.0,
        "seconds": round(seconds, 2),
    }


def evaluate_conversation(
    settings: Settings,
    conv: Conversation,
    opts: EvalOptions,
    embedder: Embedder | None,
    data_dir: Path,
    totals: Totals,
) -> None:
    fresh_dir(data_dir)
    st = eval_settings(settings, data_dir, opts.search)
    engine = db.make_engine(st.resolved_database_url())
    try:
        db.upgrade(engine)
        _ingest(engine, conv, data_dir)
        dmap, lines = stored_turns(engine, conv.sample_id)
        totals.dialogue_tokens += sum(count_tokens(text) for turns in lines.values() for _, text in turns)
        _remember_and_score(st, engine, conv, opts, embedder, dmap, lines, totals)
    finally:
        engine.dispose()


def _remember_and_score(
    st: Settings,
    engine: Engine,
    conv: Conversation,
    opts: EvalOptions,
    embedder: Embedder | None,
    dmap: DiaMap,
    lines: Turns,
    totals: Totals,
) -> None:
    dim = embedder.dim if embedder is not None else st.embed_dim
    index = DocumentedIndex.from_settings(EdgeIndex(st.index_dir, dim), engine, st, embedder)
    with ExitStack() as stack:
        stack.callback(index.close)
        if opts.memories == "observations":
            rt = _observation_runtime(stack, st, engine, conv, embedder, index, dmap, lines)
            totals.add(dream_pass(rt, trigger="eval", force=True))
        else:
            rt = Runtime.open(st, engine=engine, llm=None, embedder=embedder, index=index, busy=AlwaysIdle())
            remember_turns(engine, conv.sample_id)
            outbox.drain(rt)
        _score(rt, conv, dmap, opts.ks, totals)


def _observation_runtime(
    stack: ExitStack,
    st: Settings,
    engine: Engine,
    conv: Conversation,
    embedder: Embedder | None,
    index: DocumentedIndex,
    dmap: DiaMap,
    lines: Turns,
) -> Runtime:
    sessions = {
        session_external_id(conv.sample_id, n): (lines.get(session_external_id(conv.sample_id, n), []), obs)
        for n, obs in conv.observations.items()
    }
    server = stack.enter_context(ScriptedServer(ObservationReplay(sessions, dmap), embed_dim=st.embed_dim))
    st = st.model_copy(update={"llm_base_url": server.url})
    llm = build_llm(st, context_window=SCRIPTED_WINDOW)
    return Runtime.open(st, engine=engine, llm=llm, embedder=embedder, index=index, busy=AlwaysIdle())


def _score(rt: Runtime, conv: Conversation, dmap: DiaMap, ks: Sequence[int], totals: Totals) -> None:
    with session_scope(rt.engine) as s:
        current = s.exec(
            select(Memory.evidence)
            .where(Memory.user_id == conv.sample_id)
            .where(col(Memory.status).in_(CURRENT_STATUSES))
        ).all()
    covered = set().union(*(dmap.dia_ids(ev) for ev in current)) if current else set()
    totals.memories += len(current)
    scope = Scope(user_id=conv.sample_id)
    for q in conv.questions:
        # the questions ask what happened over the conversation: a dated fact being over now is
        # no reason to rank it lower
        hits = recall(rt, q.text, scope, k=max(ks), past_last=False).hits
        totals.rows.append(score_question(q, [dmap.dia_ids(h.evidence) for h in hits], covered, ks))


# --------------------------------------------------------------------------- the store


def _ingest(engine: Engine, conv: Conversation, data_dir: Path) -> None:
    """The conversation alone in a LoCoMo file, through the LoCoMo importer."""
    path = data_dir / "conversation.json"
    path.write_text(json.dumps([conv.raw], ensure_ascii=False), encoding="utf-8")
    report = ingest_file(engine, path, fmt="locomo", user_id=None)
    for rejection in report.rejections:
        log.warning("%s: %s", conv.sample_id, rejection.reason)


def stored_turns(engine: Engine, user_id: str) -> tuple[DiaMap, Turns]:
    """The dia_id <-> seq map of the user's stored turns, and each session's (seq, text) with the
    text as the model sees it (cleaned for the model), by external id."""
    dmap = DiaMap()
    lines: Turns = {}
    with session_scope(engine) as s:
        rows = s.exec(
            select(Session.external_id, Message.seq, Message.content, Message.meta)
            .join(Message, col(Message.session_id) == col(Session.id))
            .where(Session.user_id == user_id)
            .order_by(col(Session.id), col(Message.seq))
        ).all()
    for external_id, seq, content, meta in rows:
        dia_id = meta.get("dia_id") if meta else None
        if dia_id:
            dmap.add(dia_id, external_id, seq)
        lines.setdefault(external_id, []).append((seq, clean_for_model(content)))
    return dmap, lines


def remember_turns(engine: Engine, user_id: str) -> int:
    """Every stored turn of the user as one memory ("Speaker: text"), evidence its own message."""
    with session_scope(engine) as s:
        rows = s.exec(
            select(Session, Message)
            .join(Message, col(Message.session_id) == col(Session.id))
            .where(Session.user_id == user_id)
            .order_by(col(Session.id), col(Message.seq))
        ).all()
        for sess, m in rows:
            text = f"{m.name}: {m.content}" if m.name else m.content
            evidence = [{"session_id": sess.id, "external_id": sess.external_id, "seqs": [m.seq]}]
            cabinet.add_memory(
                s,
                user_id=sess.user_id,
                agent_id=sess.agent_id,
                project=sess.project,
                team=sess.team,
                kind=TURN_KIND,
                text=clean_for_model(text),
                source="flush",
                evidence=evidence,
                reason="every turn kept",
                now=m.created_at,
            )
    return len(rows)
