"""Crash consistency: dream passes in a child process, SIGKILLed over and over, restarted each
time, while new sessions and new messages keep arriving. At the end every message is
processed, no memory is lost or duplicated, the index equals SQL (`dreamer reindex --check`
exits 0) and the Markdown files equal what SQL renders.

Most kills come from the driver after a random delay; some children are told to SIGKILL
themselves at the n-th entry of a narrow window (see crashkit) that random timing seldom hits.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import time
from collections import Counter
from pathlib import Path

import pytest
from dreamkit import extraction_script

from dreamer.engine.dream import dream_pass
from dreamer.engine.markdown import views as markdown
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store import db, leases

from . import checks, crashkit, kit

pytestmark = pytest.mark.reliability

SEED = 20240611
USERS = 30
SESSIONS_PER_USER = 10  # 300 sessions
FIRST_WAVE = 60  # recorded before the first child; the rest arrive between kills
PER_ROUND = 4
MIN_KILLS = 60
TARGETED_EVERY = 3  # every third child is told to kill itself in one of the narrow windows
MAX_CHILDREN = 200  # a pass packs short sessions into shared calls, so many children finish before their kill
TARGETED_WAIT = 3.0  # a child told to kill itself gets this long to reach its window


def _context(monkeypatch):
    """Children forked from a server that has imported everything once (see crash_preload)."""
    here = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")])))
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["__main__", "reliability.crash_preload"])
    return ctx


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=crashkit.EMBED_DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request) -> str:
    """Empty for the embedded SQLite file in the data folder; a fresh PostgreSQL database otherwise."""
    return "" if request.param == "sqlite" else request.getfixturevalue("pg_url")


def test_kill_nine_at_random_points_loses_and_duplicates_nothing(database_url, tmp_path, server, figures, monkeypatch):
    data_dir = tmp_path / "data"
    store = "postgresql" if database_url else "sqlite"
    settings = crashkit.child_settings(str(data_dir), server.url, database_url)
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    rng = random.Random(SEED)
    plan = crashkit.build_plan(SEED, USERS, SESSIONS_PER_USER)
    waiting = list(plan.sessions)
    recorded: dict[str, tuple[str, list[dict]]] = {}

    def arrive(n: int) -> None:
        """`n` new sessions, and a few recorded ones grow by two rounds."""
        for user, ext, msgs in waiting[:n]:
            record_messages(engine, ext, msgs, user_id=user)
            recorded[ext] = (user, msgs)
        del waiting[:n]
        for ext in rng.sample(sorted(recorded), k=min(3, len(recorded))):
            user, msgs = recorded[ext]
            grown = crashkit.grow(rng, msgs)
            record_messages(engine, ext, grown, user_id=user)
            recorded[ext] = (user, grown)

    arrive(FIRST_WAVE)
    ctx = _context(monkeypatch)
    phase_file = str(tmp_path / "phase")
    kills, phases, targeted, clean_exits, children = 0, Counter(), Counter(), 0, 0
    started = time.monotonic()
    while (kills < MIN_KILLS or waiting) and children < MAX_CHILDREN:
        children += 1
        kill_phase = rng.choice(crashkit.TARGETED) if children % TARGETED_EVERY == 0 else None
        child = ctx.Process(
            target=crashkit.child_main,
            args=(str(data_dir), server.url, database_url, phase_file, kill_phase, rng.randint(1, 6)),
        )
        Path(phase_file).unlink(missing_ok=True)  # a child killed before it says anything is in "boot"
        child.start()
        child.join(TARGETED_WAIT if kill_phase else rng.uniform(0.1, 0.7))
        if child.is_alive():
            child.kill()  # SIGKILL
            child.join()
        if child.exitcode == -9:
            kills += 1
            phase = crashkit.read_phase(phase_file)
            phases[phase] += 1
            if kill_phase and phase == kill_phase:
                targeted[phase] += 1
        else:
            assert child.exitcode == 0, f"child exited with {child.exitcode}"
            clean_exits += 1
        arrive(PER_ROUND if waiting else 0)
    elapsed = time.monotonic() - started

    # One last child, never killed, finishes whatever the last kill interrupted.
    last = ctx.Process(target=crashkit.child_main, args=(str(data_dir), server.url, database_url, phase_file, None, 0))
    last.start()
    last.join(120)
    assert last.exitcode == 0

    said, lost = checks.lost_anchors(engine, crashkit.PREFER)
    dups = checks.duplicates(engine, crashkit.EMBED_DIM, settings.dup_threshold)
    figures(
        f"crash ({store}): kills survived", kills, f"{children} children in {elapsed:.0f}s, {clean_exits} clean exits"
    )
    figures(f"crash ({store}): kill phases", dict(sorted(phases.items())))
    figures(f"crash ({store}): targeted kills in their window", dict(sorted(targeted.items())))
    figures(f"crash ({store}): sessions / preference lines said", f"{len(recorded)} / {said}")
    figures(f"crash ({store}): memories current", len(checks.current(engine)))
    figures(f"crash ({store}): memories lost", len(lost))
    figures(
        f"crash ({store}): memories duplicated",
        dups.total,
        f"{len(dups.by_hash)} by hash, {len(dups.by_meaning)} by meaning",
    )

    time.sleep(crashkit.LEASE_SECONDS + 0.5)  # the last kill's run lease may outlive the last child
    late = leases.sweep_abandoned_runs(engine)  # what the next pass does first
    runs = checks.run_statuses(engine)
    figures(
        f"crash ({store}): pass runs by status",
        dict(sorted(runs.items())),
        f"a killed pass is swept as abandoned; {len(late)} only by the sweep after the last child",
    )
    assert kills >= MIN_KILLS
    assert runs["running"] == 0 and runs["abandoned"] >= 1
    assert set(targeted) == set(crashkit.TARGETED), targeted
    assert not waiting
    assert checks.unfinished_cursors(engine) == []
    assert lost == []
    assert dups.by_hash == [] and dups.by_meaning == []
    assert checks.history_mismatches(engine) == []
    assert checks.markdown_mismatches(engine, settings.workspace_dir, settings.dreams_cap) == []
    temps = checks.temp_files(settings.workspace_dir)
    swept = sum(markdown.remove_orphaned_temps(folder) for folder in {t.parent for t in temps})
    figures(
        f"crash ({store}): Markdown temp files left by kills",
        len(temps),
        "each removed by the next write to its folder",
    )
    assert swept == len(temps) and checks.temp_files(settings.workspace_dir) == []
    drift = checks.reindex_check(
        data_dir,
        {
            "DREAMER_EMBEDDER": "none",
            "DREAMER_EMBED_DIM": str(crashkit.EMBED_DIM),
            "DREAMER_DATABASE_URL": database_url,
        },
    )
    figures(f"crash ({store}): reindex --check", drift.stdout.strip(), f"exit {drift.returncode}")
    assert drift.returncode == 0, drift.stdout + drift.stderr
    engine.dispose()


def test_a_fresh_process_consolidates_by_meaning(settings, sqlite_engine, server, tmp_path):
    """Found by the driver: a process's first session compared by word overlap (an empty
    embedding cache read as no embedder) and added near duplicates."""
    st = settings.model_copy(update={"min_rounds": 1})
    for ext, line in (
        ("s1", "I prefer dark roast coffee at work."),
        ("s2", "I prefer dark roast coffee at work really."),
    ):
        rt = kit.runtime(st, sqlite_engine, server, tmp_path, dim=crashkit.EMBED_DIM)  # a new process each time
        try:
            record_messages(sqlite_engine, ext, kit.session_with(line), user_id="u")
            dream_pass(rt)
        finally:
            rt.close()
    [memory] = checks.current(sqlite_engine)
    assert memory.text == "The user prefers dark roast coffee at work."
    assert {e["external_id"] for e in memory.evidence} == {"s1", "s2"}
