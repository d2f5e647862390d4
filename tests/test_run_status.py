"""A run's status is an enum whose values are the strings the `dream_runs` table held before it
was one: stored as those strings, read back as the enum, shown and answered as the strings."""

import json

from sqlalchemy import text
from sqlmodel import select

from dreamer.core.models import DreamRun
from dreamer.core.run_status import RunStatus
from dreamer.store.db import session_scope


def test_the_values_are_the_strings_stored_before():
    assert [s.value for s in RunStatus] == [
        "running",
        "ok",
        "partial",
        "stopped",
        "failed",
        "skipped_busy",
        "abandoned",
    ]


def test_a_status_is_stored_as_its_string_and_read_back_as_the_member(engine):
    with session_scope(engine) as s:
        s.add(DreamRun(status=RunStatus.PARTIAL))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT status FROM dream_runs")).scalar_one() == "partial"
    with session_scope(engine) as s:
        run = s.exec(select(DreamRun).where(DreamRun.status == RunStatus.PARTIAL)).one()
        assert run.status is RunStatus.PARTIAL


def test_a_status_is_shown_and_answered_as_its_string():
    run = DreamRun(id=7, status=RunStatus.SKIPPED_BUSY)
    assert f"run {run.id} {run.status}" == "run 7 skipped_busy"
    assert run.model_dump(mode="json")["status"] == "skipped_busy"
    assert json.dumps({"status": run.status}) == '{"status": "skipped_busy"}'
    assert RunStatus.OK == "ok" and "ok" in {RunStatus.OK}
