import pytest
from sqlalchemy import inspect

from dreamer.core.errors import ConfigError, StoreError
from dreamer.store import db

TABLES = {
    "sessions",
    "messages",
    "cursors",
    "memories",
    "memory_events",
    "daily_notes",
    "dream_runs",
    "leases",
    "activity",
    "scheduler_state",
    "views_due",
    "watched_files",
    "teams",
    "offloaded_bodies",
}


def test_upgrade_and_downgrade(db_url):
    engine = db.make_engine(db_url)
    try:
        db.upgrade(engine)
        assert db.current_revision(engine) == db.HEAD
        names = set(inspect(engine).get_table_names())
        assert TABLES <= names
        indexes = {ix["name"] for ix in inspect(engine).get_indexes("memories")}
        assert {"ix_memories_scope_status", "ix_memories_outbox", "ix_memories_hash"} <= indexes
        assert {ix["name"] for ix in inspect(engine).get_indexes("dream_runs")} == {"ix_dream_runs_status"}
        db.require_schema(engine)
        db.downgrade(engine)
        assert db.current_revision(engine) is None
        assert not TABLES & set(inspect(engine).get_table_names())
        db.upgrade(engine)
        assert db.current_revision(engine) == db.HEAD
    finally:
        engine.dispose()


def test_require_schema_on_an_empty_database(tmp_path):
    engine = db.make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with pytest.raises(StoreError, match="run `dreamer init`"):
        db.require_schema(engine)


def test_bad_and_unreachable_urls():
    for url in ("not a url", "nosuchdb://x"):
        with pytest.raises(ConfigError):
            db.make_engine(url)
    engine = db.make_engine("postgresql+psycopg://nobody:secret@127.0.0.1:1/none")
    with pytest.raises(StoreError, match="cannot reach database") as info:
        db.upgrade(engine)
    assert "secret" not in str(info.value)


def test_redact_url_hides_the_password():
    assert db.redact_url("postgresql+psycopg://u:pw@h:5432/d") == "postgresql+psycopg://u:***@h:5432/d"
