"""Whole-store consistency checks shared by the reliability tests: cursors, lost and duplicated
memories, history, the Markdown view and the index against SQL."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlmodel import select

from dreamer.core.consolidate import material_difference, same_family
from dreamer.core.models import CURRENT_STATUSES, Cursor, DreamRun, Memory, MemoryEvent, Message, Session
from dreamer.engine.markdown import entries as markdown_entries
from dreamer.engine.markdown import render as markdown_render
from dreamer.engine.markdown import views as markdown
from dreamer.llm.scripted.bodies import embed_text
from dreamer.store.db import session_scope


def scope_key(m: Memory) -> tuple:
    return (m.user_id, m.agent_id, m.project, m.team)


def current(engine) -> list[Memory]:
    with session_scope(engine) as s:
        return list(s.exec(select(Memory).where(Memory.status.in_(CURRENT_STATUSES))).all())


def run_statuses(engine) -> Counter:
    with session_scope(engine) as s:
        return Counter(s.exec(select(DreamRun.status)).all())


def unfinished_cursors(engine) -> list[tuple[int, int, int, str]]:
    """(session id, processed, last seq, status) of every session not fully processed."""
    with session_scope(engine) as s:
        rows = s.exec(select(Session, Cursor).join(Cursor, Cursor.session_id == Session.id)).all()
    return [
        (sess.id, c.processed_seq, sess.last_seq, c.status)
        for sess, c in rows
        if c.processed_seq != sess.last_seq or c.status != "ok"
    ]


def lost_anchors(engine, pattern) -> tuple[int, list[tuple[int, int]]]:
    """(how many user lines match `pattern`, those no current memory cites as evidence)."""
    with session_scope(engine) as s:
        said = [
            (m.session_id, m.seq)
            for m in s.exec(select(Message).where(Message.role == "user")).all()
            if pattern.search(m.content)
        ]
    cited: set[tuple[int, int]] = set()
    for m in current(engine):
        for e in m.evidence:
            cited.update((int(e["session_id"]), int(q)) for q in e.get("seqs", []))
    return len(said), sorted(set(said) - cited)


@dataclass
class Duplicates:
    by_hash: list[tuple] = field(default_factory=list)
    by_meaning: list[tuple[str, str, float]] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.by_hash) + len(self.by_meaning)


def duplicates(engine, dim: int, threshold: float) -> Duplicates:
    """Current memories that share a scope and a content hash, or are as close as `threshold`
    without a material difference (two claims that differ in a number, date, negation or name
    are both kept unless a judge says otherwise)."""
    out = Duplicates()
    groups: dict[tuple, list[Memory]] = defaultdict(list)
    for m in current(engine):
        groups[scope_key(m)].append(m)
    for key, members in groups.items():
        counts = Counter(m.content_hash for m in members)
        out.by_hash += [(key, h, n) for h, n in counts.items() if n > 1]
        vectors = {m.id: np.asarray(embed_text(m.text, dim)) for m in members}
        for a, b in itertools.combinations(members, 2):
            if a.content_hash == b.content_hash or not same_family(a.kind, b.kind):
                continue
            sim = float(np.dot(vectors[a.id], vectors[b.id]))
            if sim >= threshold and not material_difference(a.text, b.text):
                out.by_meaning.append((a.text, b.text, round(sim, 3)))
    return out


def history_mismatches(engine) -> list[str]:
    """Memories whose history does not explain their evidence: one add, one merge per extra entry."""
    with session_scope(engine) as s:
        memories = s.exec(select(Memory)).all()
        events = s.exec(select(MemoryEvent)).all()
    by_memory: dict[str, Counter] = defaultdict(Counter)
    for e in events:
        by_memory[e.memory_id][e.event] += 1
    bad = []
    for m in memories:
        seen = by_memory[m.id]
        if seen["add"] != 1 or len(m.evidence) != 1 + seen["merge"]:
            bad.append(f"{m.id}: {dict(seen)} for {len(m.evidence)} evidence entries")
    return bad


def markdown_mismatches(engine, workspace: Path, dreams_cap: int) -> list[str]:
    """Every user's files parse, and equal what SQL renders now; no stray user folder."""
    with session_scope(engine) as s:
        memories = s.exec(select(Memory)).all()
    by_user: dict[str, list[Memory]] = defaultdict(list)
    for m in memories:
        by_user[m.user_id].append(m)
    bad: list[str] = []
    expected_dirs = set()
    for user_id, mine in by_user.items():
        expected_dirs.add(markdown.user_dir(workspace, user_id).name)
        ids = {m.id for m in mine if m.status in CURRENT_STATUSES}
        for f in markdown_render.render_user(workspace, user_id, mine, dreams_cap=dreams_cap):
            on_disk = f.path.read_text(encoding="utf-8") if f.path.exists() else None
            if on_disk != f.content:
                bad.append(f"{f.path.relative_to(workspace)} differs from SQL")
                continue
            stray = {e.memory_id for e in markdown_entries.parse_entries(on_disk)} - ids
            if stray:
                bad.append(f"{f.path.relative_to(workspace)} lists ids not current in SQL: {sorted(stray)[:3]}")
    if workspace.exists():
        extra = {p.name for p in workspace.iterdir() if p.is_dir()} - expected_dirs
        bad += [f"stray folder {name}" for name in sorted(extra)]
    return bad


def temp_files(workspace: Path) -> list[Path]:
    """Temp files of interrupted writes (each is removed by the next write to its folder)."""
    return sorted(workspace.rglob(".*.tmp")) if workspace.exists() else []


def reindex_check(data_dir: Path, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    """`dreamer reindex --check` in its own process, as an operator would run it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "dreamer", "--data-dir", str(data_dir), "reindex", "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
