"""Profiles evaluation, the pipeline: every profile is one user of one fresh store (the real SQL
store, the embedded index, the configured embedder); its sessions are recorded and dreamed in
order through the real pass (forced, so no quiet or rounds rule holds them back), and after each
session the updates it carries and the tests asked at it are scored.

``--extractor replay`` stores each session's annotated facts as that session's candidates (so
routing, consolidation and recall are measured apart from extraction); ``rules`` and ``llm``
extract from the turns. The judge is the oracle (`profiles_oracle`, the only reader of the
annotations besides scoring), the configured model, or none."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from sqlalchemy.engine import Engine
from sqlmodel import col, select

from dreamer.core.consolidate import token_similarity
from dreamer.core.errors import ConfigError
from dreamer.core.models import DreamRun, Memory, MemoryEvent
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.embed.embedders import build_embedder
from dreamer.engine.consolidation.judge import Judge, LLMJudge
from dreamer.engine.documents import DocumentedIndex
from dreamer.engine.dream import dream_pass
from dreamer.engine.extraction.extract import Extractor
from dreamer.engine.records import review
from dreamer.engine.rules.extractor import RulesExtractor
from dreamer.engine.runtime import Runtime
from dreamer.eval.harness import UNLIMITED, Tokens, fresh_dir, prepare_work_dir
from dreamer.eval.profiles.format import Profile, load_profiles
from dreamer.eval.profiles.oracle import CountingJudge, OracleJudge, ReplayExtractor
from dreamer.eval.profiles.score import (
    Scores,
    Similar,
    StoredMemory,
    answer,
    count_heard,
    count_noise,
    score_supersessions,
    score_test,
    score_updates,
)
from dreamer.index.edge import EdgeIndex
from dreamer.ingest.store import record_messages
from dreamer.online.recall import recall
from dreamer.store import db
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope
from dreamer.store.held import held_changes

ExtractorName = Literal["replay", "rules", "llm"]
JudgeName = Literal["oracle", "llm", "none"]
EXTRACTORS: tuple[ExtractorName, ...] = ("replay", "rules", "llm")
JUDGES: tuple[JudgeName, ...] = ("oracle", "llm", "none")
ROUTED_EVENTS = ("add", "merge", "supersede", "hold")


@dataclass
class ProfilesOptions:
    path: Path
    extractor: ExtractorName = "replay"
    judge: JudgeName = "none"
    work_dir: Path | None = None  # kept for inspection when given; a temp folder otherwise


def default_judge(settings: Settings) -> JudgeName:
    """`llm` when an endpoint is configured, else `none` (what a store without a model does)."""
    return "llm" if settings.llm_configured else "none"


def check_options(settings: Settings, opts: ProfilesOptions) -> None:
    """`ConfigError` for a choice the settings cannot serve."""
    for what, value in (("--extractor", opts.extractor), ("--judge", opts.judge)):
        if value == "llm" and not settings.llm_configured:
            raise ConfigError(f"{what} llm needs an endpoint: set DREAMER_LLM_BASE_URL")


def sessions_in(profiles: list[Profile]) -> int:
    """The steps of a run: every session of every profile."""
    return sum(len(p.sessions) for p in profiles)


def run_profiles(
    settings: Settings, opts: ProfilesOptions, on_session: Callable[[str, int], None] | None = None
) -> dict[str, Any]:
    """Evaluate every profile of `opts.path`; the result has exactly the documented keys.
    `on_session(user_id, session)` is called after each session is dreamed and scored."""
    started = time.perf_counter()
    check_options(settings, opts)
    profiles = load_profiles(opts.path)
    if opts.work_dir is not None:
        prepare_work_dir(opts.work_dir)
    scores, tokens = Scores(), Tokens()
    names: set[str] = set()
    with ExitStack() as stack:
        root = opts.work_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="dreamer-profiles-")))
        data_dir = root / "store"
        fresh_dir(data_dir)
        rt = stack.enter_context(_runtime(settings, opts, data_dir))
        oracle = OracleJudge()
        judge = _judge(rt, opts, oracle)
        extractor = _extractor(rt, opts)
        similar = similar_by(rt)
        for profile in profiles:
            oracle.profile = profile
            for session in profile.sessions:
                if session.turns:
                    if isinstance(extractor, ReplayExtractor):
                        extractor.facts = session.facts
                    run = _dream(rt, profile, session.number, _timed(session.turns, session.time), extractor, judge)
                    tokens.add(run)
                    names.add(run.extractor)
                    score_updates(profile, session.number, _stored(rt.engine, profile.user_id), scores)
                for test in (t for t in profile.tests if t.session == session.number):
                    top = _recalled(rt, profile.user_id, test.query, test.time)
                    score_test(profile, test, top, scores, similar)
                    scores.answers.append(answer(profile, test, top, scores))
                if on_session is not None:
                    on_session(profile.user_id, session.number)
            stored = _stored(rt.engine, profile.user_id)
            score_supersessions(profile, stored, scores)
            held, queued = changes_queued(rt.engine, profile.user_id)
            scores.changing, scores.changing_queued = scores.changing + held, scores.changing_queued + queued
            scores.stored += len(stored)
            scores.noise += count_noise(profile, stored)
            facts, heard = count_heard(profile, stored)
            scores.facts, scores.heard = scores.facts + facts, scores.heard + heard
        scores.pairs = judge.pairs if judge is not None else 0
        for miss in scores.unrouted:  # why it was not routed: how alike the two are
            miss["similarity"] = similarity(rt, miss["old"], miss["new"])
    return _result(opts, profiles, scores, tokens, names, time.perf_counter() - started)


def _result(
    opts: ProfilesOptions,
    profiles: list[Profile],
    scores: Scores,
    tokens: Tokens,
    names: set[str],
    seconds: float,
) -> dict[str, Any]:
    body = scores.as_json()
    body["judge"] = {"name": opts.judge, **body["judge"]}
    replay = opts.extractor == "replay"
    return {
        "extractor": ", ".join(sorted(names)) or opts.extractor,
        "profiles": len(profiles),
        "sessions": sessions_in(profiles),
        **body,
        "noise": {
            "stored": None if replay else scores.noise,
            "share": None if replay or not scores.stored else round(scores.noise / scores.stored, 4),
        },
        "heard": {
            "facts": None if replay else scores.facts,
            "share": None if replay or not scores.facts else round(scores.heard / scores.facts, 4),
        },
        "unrouted": scores.unrouted,
        "tokens": {
            "llm_calls": tokens.llm_calls,
            "prompt": tokens.prompt_tokens,
            "completion": tokens.completion_tokens,
        },
        "seconds": round(seconds, 2),
    }


def profile_settings(settings: Settings, data_dir: Path, opts: ProfilesOptions) -> Settings:
    """The run's settings: its own data dir, embedded stores, every session read whole; the
    per-session cap lifted for replay (the annotations are the candidates)."""
    update: dict[str, Any] = {
        "data_dir": data_dir,
        "database_url": "",
        "qdrant_url": "",
        "tokens_per_session_pass": UNLIMITED,
        "max_sessions_per_pass": UNLIMITED,
        "llm_pass_token_budget": UNLIMITED,
        "max_age_days": 100 * 365,
    }
    if opts.extractor == "replay":
        update["entries_per_session"] = 1000
    return settings.model_copy(update=update)


class _Opened:
    """The run's runtime over a fresh store, closed with everything it opened."""

    def __init__(self, settings: Settings, opts: ProfilesOptions, data_dir: Path) -> None:
        self.st = profile_settings(settings, data_dir, opts)
        self.opts = opts
        self.stack = ExitStack()

    def __enter__(self) -> Runtime:
        st = self.st
        engine = db.make_engine(st.resolved_database_url())
        self.stack.callback(engine.dispose)
        db.upgrade(engine)
        embedder = build_embedder(st)
        dim = embedder.dim if embedder is not None else st.embed_dim
        index = DocumentedIndex.from_settings(EdgeIndex(st.index_dir, dim), engine, st, embedder)
        self.stack.callback(index.close)
        needs_llm = "llm" in (self.opts.extractor, self.opts.judge)
        llm = None
        if needs_llm:
            from dreamer.engine.endpoint import open_llm

            llm = open_llm(st, engine)  # the mode and the window as the server tells them
        return Runtime.open(st, engine=engine, llm=llm, embedder=embedder, index=index, busy=AlwaysIdle())

    def __exit__(self, *exc: object) -> None:
        self.stack.close()


def _runtime(settings: Settings, opts: ProfilesOptions, data_dir: Path) -> _Opened:
    return _Opened(settings, opts, data_dir)


def _judge(rt: Runtime, opts: ProfilesOptions, oracle: OracleJudge) -> CountingJudge | None:
    if opts.judge == "none":
        return None
    inner: Judge = oracle if opts.judge == "oracle" else LLMJudge(_llm(rt))
    return CountingJudge(inner)


def _extractor(rt: Runtime, opts: ProfilesOptions) -> Extractor:
    limit = rt.settings.entries_per_session
    if opts.extractor == "replay":
        return ReplayExtractor()
    if opts.extractor == "rules":
        return RulesExtractor(limit=limit)
    from dreamer.engine.extraction.extract import LLMExtractor

    return LLMExtractor(_llm(rt), limit=limit)


def _llm(rt: Runtime) -> Any:
    if rt.llm is None:
        raise ConfigError("no LLM endpoint: set DREAMER_LLM_BASE_URL")
    return rt.llm


def _timed(turns: list[dict[str, str]], at: datetime | None) -> list[dict[str, Any]]:
    """A session's turns, said a second apart from its `time` when it has one."""
    if at is None:
        return list(turns)
    return [t | {"created_at": (at + timedelta(seconds=i)).isoformat()} for i, t in enumerate(turns)]


def _dream(
    rt: Runtime, profile: Profile, number: int, turns: list[dict[str, Any]], extractor: Extractor, judge: Judge | None
) -> DreamRun:
    rec = record_messages(rt.engine, f"{profile.user_id}:{number}", turns, user_id=profile.user_id, source="eval")
    return dream_pass(rt, trigger="eval", session_ids=[rec.session_id], force=True, extractor=extractor, judge=judge)


def _stored(engine: Engine, user_id: str) -> list[StoredMemory]:
    """Every memory of the user, with the ids its add, merge and supersede events were routed with."""
    with session_scope(engine) as s:
        rows = s.exec(select(Memory).where(Memory.user_id == user_id).order_by(col(Memory.created_at))).all()
        ids = [m.id for m in rows]
        events = s.exec(
            select(MemoryEvent.memory_id, MemoryEvent.data)
            .where(col(MemoryEvent.memory_id).in_(ids))
            .where(col(MemoryEvent.event).in_(ROUTED_EVENTS))
        ).all()
    routed: dict[str, set[str]] = {}
    for memory_id, data in events:
        if not isinstance(data, dict):
            continue
        owner = str(data.get("by") or memory_id)  # a supersede event records its successor's routing
        routed.setdefault(owner, set()).update(str(r) for r in data.get("routed") or [])
        if data.get("by"):  # and a memory its successor replaced was among that one's candidates
            routed[owner].add(memory_id)
    return [
        StoredMemory(m.id, m.text, m.status, frozenset(routed.get(m.id, set())), m.topic, m.superseded_by) for m in rows
    ]


def changes_queued(engine: Engine, user_id: str) -> tuple[int, int]:
    """(changes of the user nobody judged, of them those the review queue holds as the pair)."""
    with session_scope(engine) as s:
        held = held_changes(s, user_id)
    items = {(i.memory_id, i.replaced_by) for i in review.queue(engine, user_id=user_id, limit=100_000)}
    return len(held), sum((m, by) in items for m, by in held.items())


def similar_by(rt: Runtime) -> Similar | None:
    """The embedder's cosine of two texts (each embedded once per run), or None without one."""
    embedder = rt.embedder
    if embedder is None:
        return None
    vectors: dict[str, list[float]] = {}

    def similar(a: str, b: str) -> float:
        missing = [t for t in dict.fromkeys((a, b)) if t not in vectors]
        if missing:
            vectors.update(zip(missing, embedder.embed(missing)))
        return sum(x * y for x, y in zip(vectors[a], vectors[b]))

    return similar


def similarity(rt: Runtime, a: str, b: str) -> float:
    """The similarity routing compares two texts by: the embedder's cosine, else word overlap."""
    if rt.embedder is None:
        return round(token_similarity(a, b), 4)
    va, vb = rt.embedder.embed([a, b])
    return round(sum(x * y for x, y in zip(va, vb)), 4)


def _recalled(rt: Runtime, user_id: str, query: str, at: datetime | None = None) -> list[StoredMemory]:
    """Recall's top 5 as asked at `at` (None: now): a fact whose time is over by then is past."""
    hits = recall(rt, query, Scope(user_id=user_id), k=5, now=at).hits
    return [StoredMemory(h.memory_id, h.text, h.status, past=h.past) for h in hits]
