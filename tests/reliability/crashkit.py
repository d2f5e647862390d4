"""The crash driver's two halves: the corpus and checks (test process), and the child that runs
dream passes until it is killed (a process forked from a preloaded server).

The child records which phase of the pass it is in (one small file, overwritten with
`os.pwrite`), so the driver can tell where each SIGKILL landed. A child may also be told to
SIGKILL itself the n-th time it enters a phase: a real kill at a point random timing rarely
hits (inside the SQL transaction, between commit and index upsert, after the rows are marked
indexed and their views due but before a view is rendered, between a Markdown temp file and its
rename). All of this lives here, in the test; the library has no crash hooks.
"""

from __future__ import annotations

import functools
import os
import random
import re
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

EMBED_DIM = 128
LEASE_SECONDS = 0.5  # session and run leases: a killed child holds them this long
TARGETED = ("between_llm", "in_tx", "committed", "indexed", "due", "md_rename")
PHASE_WIDTH = 16
PREFER = re.compile(r"\bI prefer ([^.!?\n]+)", re.I)

SUBJECTS = [
    "dark roast coffee",
    "green tea",
    "window seats",
    "aisle seats",
    "vim keybindings",
    "tabs over spaces",
    "short answers",
    "metric units",
    "jazz records",
    "quiet hotels",
    "early flights",
    "paper books",
    "dark mode",
    "mechanical keyboards",
    "python type hints",
    "long walks",
    "spicy food",
    "cold showers",
    "live music",
    "board games",
    "oat milk",
    "rust for tooling",
    "sql over orms",
    "night trains",
]
TAILS = ["in the morning", "on long trips", "at work", "at home", "for weekend plans", "when travelling"]
FILLER = ["ok", "sounds good", "thanks", "noted", "sure", "great, go on", "fine by me", "right"]


# --------------------------------------------------------------------------- corpus


@dataclass
class Plan:
    """What the driver records: sessions (user, external id, messages), some grown later."""

    sessions: list[tuple[str, str, list[dict]]] = field(default_factory=list)


def preference_lines(rng: random.Random, user: int) -> list[str]:
    """A user's pool: base statements plus near-duplicate rewordings of some of them."""
    subjects = rng.sample(SUBJECTS, 6)
    lines = []
    for subject in subjects:
        tail = rng.choice(TAILS)
        lines.append(f"I prefer {subject} {tail}.")
        lines.append(f"I prefer {subject} {tail} !")  # same content hash
        lines.append(f"I prefer {subject} {tail} really.")  # near duplicate by meaning
    return lines


def conversation(rng: random.Random, pool: list[str], rounds: int) -> list[dict]:
    said = rng.sample(pool, k=min(2, len(pool)))
    texts = said + rng.sample(FILLER, k=max(0, rounds - len(said)))
    rng.shuffle(texts)
    out = []
    for i, text in enumerate(texts):
        out += [{"role": "user", "content": text}, {"role": "assistant", "content": f"reply {i}"}]
    return out


def build_plan(seed: int, users: int, sessions_per_user: int) -> Plan:
    rng = random.Random(seed)
    plan = Plan()
    for u in range(users):
        pool = preference_lines(rng, u)
        for k in range(sessions_per_user):
            plan.sessions.append((f"user-{u:03d}", f"u{u:03d}-s{k:02d}", conversation(rng, pool, 4)))
    return plan


def grow(rng: random.Random, messages: list[dict]) -> list[dict]:
    """The same session with two more rounds (one of them a preference said before or anew)."""
    users = [m["content"] for m in messages if m["role"] == "user"]
    said = rng.choice(users)
    extra = [said if PREFER.search(said) else rng.choice(FILLER), rng.choice(FILLER)]
    out = list(messages)
    for text in extra:
        out += [{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}]
    return out


# --------------------------------------------------------------------------- child


def child_main(
    data_dir: str, url: str, database_url: str, phase_file: str, kill_phase: str | None, kill_nth: int
) -> None:
    """Run dream passes until nothing is due; killed from outside, or by itself at `kill_phase`."""
    from dreamer.engine.dream import dream_pass
    from dreamer.store import db

    tracker = Tracker(phase_file, kill_phase, kill_nth)
    tracker.enter("boot")
    tracker.install()
    settings = child_settings(data_dir, url, database_url)
    engine = db.make_engine(settings.resolved_database_url())
    rt = child_runtime(settings, engine)
    try:
        while True:
            tracker.enter("start")
            dream_pass(rt, trigger="crash-test", force=True)
            if not pending(rt):
                break
            tracker.enter("idle")
    finally:
        rt.index.close()
        engine.dispose()
    tracker.enter("idle")
    sys.exit(0)


def child_settings(data_dir: str, url: str, database_url: str = ""):
    from dreamer.core.settings import Settings

    return Settings(
        _env_file=None,
        data_dir=Path(data_dir),
        database_url=database_url,
        llm_base_url=url,
        embed_dim=EMBED_DIM,
        min_rounds=1,
        max_sessions_per_pass=8,
        lease_seconds=LEASE_SECONDS,
        ambiguous_low=0.6,
        llm_timeout=10,
    )


def child_runtime(settings, engine):
    from dreamer.embed.embedders import CachedEmbedder, OpenAIEmbedder
    from dreamer.engine.runtime import Runtime
    from dreamer.index.edge import EdgeIndex
    from dreamer.llm.client import OpenAILLM, build_openai_client
    from dreamer.store.busy import AlwaysIdle

    client = build_openai_client(settings)
    llm = OpenAILLM(client, model="scripted", max_retries=2, retry_base=0.01, retry_cap=0.05)
    embedder = CachedEmbedder(OpenAIEmbedder(client, model="scripted-embed", dim=EMBED_DIM))
    index = EdgeIndex(settings.index_dir, EMBED_DIM)
    return Runtime.open(settings, engine=engine, llm=llm, embedder=embedder, index=index, busy=AlwaysIdle())


def pending(rt) -> bool:
    """Anything left to do: a session with messages past its cursor, or an unindexed memory."""
    from sqlmodel import func, select

    from dreamer.core.models import Cursor, Memory, Session
    from dreamer.store.db import session_scope

    with session_scope(rt.engine) as s:
        due = s.exec(
            select(func.count())
            .select_from(Session)
            .join(Cursor, Cursor.session_id == Session.id)
            .where(Session.last_seq > Cursor.processed_seq)
            .where(Cursor.status != "quarantined")
        ).one()
        unindexed = s.exec(select(func.count()).select_from(Memory).where(Memory.indexed_at.is_(None))).one()
    return bool(due or unindexed)


class Tracker:
    """Writes the current phase to a file; SIGKILLs this process at the n-th entry of one phase."""

    def __init__(self, path: str, kill_phase: str | None, kill_nth: int) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self.kill_phase = kill_phase
        self.kill_nth = kill_nth
        self.seen = 0

    def enter(self, phase: str) -> None:
        os.pwrite(self.fd, phase.ljust(PHASE_WIDTH).encode("ascii"), 0)
        if phase == self.kill_phase:
            self.seen += 1
            if self.seen >= self.kill_nth:
                os.kill(os.getpid(), signal.SIGKILL)

    def install(self) -> None:
        """Wrap the pass's steps so each one announces itself."""
        from dreamer.engine import group, outbox
        from dreamer.engine.markdown import views as markdown
        from dreamer.llm.client import OpenAILLM
        from dreamer.store import cabinet, gate

        self._around(group, "load_work", "load", None)
        self._around(OpenAILLM, "complete_json", "llm", "between_llm")
        self._around(gate, "insert_memories", None, "in_tx")
        self._around(cabinet, "merge_into", None, "in_tx")
        self._around(group, "plan_session", "plan", None)
        self._around(group, "apply_session", "apply", "committed")
        self._around(outbox, "_upsert", "index", "indexed")
        self._around(outbox, "_mark_indexed", None, "due")  # marked indexed, its view due, not rendered
        self._around(markdown, "write_files", "markdown", None)
        markdown.os = _OsWithHook(self)  # type: ignore[attr-defined]

    def _around(self, owner, name: str, before: str | None, after: str | None) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*args, **kwargs):
            if before:
                self.enter(before)
            result = inner(*args, **kwargs)
            if after:
                self.enter(after)
            return result

        setattr(owner, name, wrapper)


class _OsWithHook:
    """`os` for dreamer.markdown, announcing each rename of a written temp file."""

    def __init__(self, tracker: Tracker) -> None:
        self._tracker = tracker

    def __getattr__(self, name: str):
        return getattr(os, name)

    def replace(self, src, dst) -> None:
        self._tracker.enter("md_rename")
        os.replace(src, dst)


def read_phase(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(PHASE_WIDTH).decode("ascii", "replace").strip() or "boot"
    except FileNotFoundError:
        return "boot"
