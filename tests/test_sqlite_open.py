"""Opening one SQLite store from many processes at once: the WAL switch that SQLite refuses to
all but one of them without waiting is asked again, never reported as a locked database."""

import multiprocessing
import sqlite3
import time

import pytest
from sqlalchemy import text

from dreamer.core.private import private_file
from dreamer.store import db


def test_a_locked_step_is_asked_again_until_it_is_done():
    calls = []

    def step():
        calls.append(len(calls))
        if len(calls) < 3:
            raise sqlite3.OperationalError("database is locked")

    db.when_unlocked(step, seconds=5, pause=0)
    assert calls == [0, 1, 2]


def test_a_step_that_fails_otherwise_is_not_asked_again():
    calls = []

    def step():
        calls.append(1)
        raise sqlite3.OperationalError("no such table: memories")

    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        db.when_unlocked(step, seconds=5, pause=0)
    assert calls == [1]


def test_a_step_still_locked_at_the_deadline_says_so():
    calls = []

    def step():
        calls.append(1)
        raise sqlite3.OperationalError("database is locked")

    with pytest.raises(sqlite3.OperationalError, match="locked"):
        db.when_unlocked(step, seconds=0, pause=0)
    assert calls == [1]


def _open_and_read(path: str, gate: str) -> str:
    import os

    while not os.path.exists(gate):
        time.sleep(0.0005)
    engine = db.make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            mode = conn.execute(text("PRAGMA journal_mode")).scalar_one()
            conn.execute(text("SELECT count(*) FROM sqlite_master")).scalar_one()
        return str(mode)
    except Exception as exc:  # the figure under test: which opens failed, and how
        return f"{type(exc).__name__}: {exc}"
    finally:
        engine.dispose()


def test_processes_opening_one_new_store_at_once_all_get_it_in_wal(tmp_path):
    rounds, procs = 25, 6
    answers = []
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        for r in range(rounds):
            path = private_file(tmp_path / f"store-{r}.db")  # made empty first, as the CLI does
            gate = tmp_path / f"gate-{r}"
            pending = [pool.apply_async(_open_and_read, (str(path), str(gate))) for _ in range(procs)]
            time.sleep(0.05)
            gate.touch()
            answers += [p.get(timeout=60) for p in pending]
    assert answers == ["wal"] * rounds * procs
