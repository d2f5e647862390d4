"""The dream-pass bench: wall time with a share of the sessions changed, the LLM instant."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import insert, update
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from dreamer.core.models import Cursor, Session, utcnow
from dreamer.core.settings import Settings
from dreamer.engine.dream import dream_pass
from dreamer.engine.runtime import Runtime
from dreamer.eval.bench.fixtures import UNLIMITED, BenchResult, fresh_store, sentence
from dreamer.index.edge import EdgeIndex
from dreamer.store import gate
from dreamer.store.busy import AlwaysIdle
from dreamer.store.db import session_scope


def bench_pass(settings: Settings, tmp: Path, sizes: Sequence[int], seed: int) -> BenchResult:
    """Dream-pass wall time with 0 %, 1 % and 100 % of the sessions changed, the LLM instant."""
    from dreamer.llm.client import OpenAILLM, build_openai_client
    from dreamer.llm.scripted.server import Reply, ScriptedServer

    rows = []
    with ScriptedServer(lambda body: Reply(content='{"memories":[]}')) as server:
        for n in sizes:
            st, engine = fresh_store(
                settings,
                tmp / f"n{n}",
                llm_base_url=server.url,
                embedder="none",
                max_sessions_per_pass=UNLIMITED,
                min_rounds=0,
                triage=False,
                max_age_days=100 * 365,
                llm_pass_token_budget=UNLIMITED,
            )
            sessions = synthetic_sessions(engine, n, seed)
            llm = OpenAILLM(build_openai_client(st), model="scripted", max_retries=0)
            index = EdgeIndex(st.index_dir, st.embed_dim)
            rt = Runtime.open(st, engine=engine, llm=llm, embedder=None, index=index, busy=AlwaysIdle())
            rng = random.Random(seed)
            for share in (0.0, 0.01, 1.0):
                changed = touch_sessions(engine, sessions, share, rng)
                started = time.perf_counter()
                run_row = dream_pass(rt, trigger="bench", force=True)
                seconds = time.perf_counter() - started
                rows.append(
                    {
                        "sessions": n,
                        "changed_share": share,
                        "changed": changed,
                        "seconds": round(seconds, 3),
                        "sessions_processed": run_row.sessions,
                        "llm_calls": run_row.llm_calls,
                    }
                )
            rt.close()
            index.close()
            engine.dispose()
    ratios = {str(n): _share_ratio(rows, n) for n in sizes}
    return {
        "rows": rows,
        "pass_1pct_over_100pct": ratios,
        "goal": "0 % changed <= 0.5 s at the largest size; 1 %/100 % close to 0.01",
    }


def _share_ratio(rows: list[BenchResult], n: int) -> float:
    one = next(r for r in rows if r["sessions"] == n and r["changed_share"] == 0.01)
    full = next(r for r in rows if r["sessions"] == n and r["changed_share"] == 1.0)
    return round(float(one["seconds"]) / max(float(full["seconds"]), 1e-9), 4)


MESSAGE_TOKENS = 16  # what a synthetic message counts (the sessions' running totals agree with it)


def synthetic_sessions(engine: Engine, n: int, seed: int, messages: int = 4) -> list[int]:
    """`n` sessions of `messages` alternating turns, all already processed (cursor at the end)."""
    rng = random.Random(seed)
    now = utcnow() - timedelta(hours=1)
    with session_scope(engine) as s:
        s.exec(
            insert(Session),
            params=[
                dict(
                    external_id=f"s{i}",
                    source="bench",
                    user_id=f"u{i % max(1, n // 10)}",
                    mode="agent",
                    created_at=now,
                    updated_at=now,
                    message_count=messages,
                    rounds=messages // 2,
                    last_seq=messages,
                    token_total=messages * MESSAGE_TOKENS,
                )
                for i in range(n)
            ],
        )
        ids = [sid for sid in s.exec(select(col(Session.id)).order_by(col(Session.id))).all() if sid is not None]
        s.exec(
            insert(Cursor),
            params=[
                dict[str, Any](session_id=i, processed_seq=messages, status="ok", attempts=0, updated_at=now)
                for i in ids
            ],
        )
        batch = []
        for sid in ids:
            for seq in range(1, messages + 1):
                batch.append(_message(sid, seq, sentence(rng), now))
            if len(batch) >= 20_000:
                gate.insert_messages(s, batch)
                batch = []
        if batch:
            gate.insert_messages(s, batch)
    return ids


def _message(sid: int, seq: int, text: str, at: datetime) -> dict[str, Any]:
    return dict(
        session_id=sid,
        seq=seq,
        role="user" if seq % 2 else "assistant",
        content=text,
        content_hash=f"{sid}:{seq}",
        created_at=at,
        token_count=MESSAGE_TOKENS,
    )


def touch_sessions(engine: Engine, sessions: list[int], share: float, rng: random.Random) -> int:
    """Append one message to `share` of the sessions; returns how many changed."""
    chosen = rng.sample(sessions, int(round(len(sessions) * share)))
    if not chosen:
        return 0
    now = utcnow() - timedelta(minutes=30)
    with session_scope(engine) as s:
        last = (
            dict(s.exec(select(Session.id, Session.last_seq).where(col(Session.id).in_(chosen))).all())
            if len(chosen) < 30_000
            else dict(s.exec(select(Session.id, Session.last_seq)).all())
        )
        gate.insert_messages(s, [_message(sid, last[sid] + 1, sentence(rng), now) for sid in chosen])
        for start in range(0, len(chosen), 5_000):
            part = chosen[start : start + 5_000]
            s.exec(
                update(Session)
                .where(col(Session.id).in_(part))
                .values(
                    last_seq=Session.last_seq + 1,
                    message_count=Session.message_count + 1,
                    token_total=Session.token_total + MESSAGE_TOKENS,
                    updated_at=now,
                )
            )
    return len(chosen)
