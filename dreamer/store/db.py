"""Engine construction and schema migrations (Alembic) for the SQL store."""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.engine.interfaces import DBAPIConnection
from sqlalchemy.exc import ArgumentError, DatabaseError, NoSuchModuleError, SQLAlchemyError
from sqlmodel import Session as DBSession
from sqlmodel import SQLModel, create_engine

from dreamer.core.errors import ConfigError, StoreError
from dreamer.core.private import private_dir, private_file

if TYPE_CHECKING:
    from alembic.config import Config

log = logging.getLogger(__name__)

HEAD = "0016"
SQLITE_BUSY_SECONDS = 30.0  # how long a SQLite statement waits on another process's lock
MIGRATION_LOCK_SUFFIX = ".migrate.lock"  # beside a SQLite database file
MIGRATION_LOCK_KEY = int.from_bytes(b"dreamer", "big")  # PostgreSQL's advisory lock of the migrations

Upsert = Callable[[type[SQLModel]], postgresql.Insert | sqlite.Insert]
"""A dialect's `insert` that knows ON CONFLICT."""


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Build an engine; SQLite gets WAL, a busy timeout and foreign keys.

    Statement parameters are hidden from SQLAlchemy's logs and error messages: they carry
    transcript text, which may hold secrets (the ledger is stored raw; nothing else may show it).
    """
    parsed = _parsed_url(url)
    if in_memory_sqlite(parsed):
        raise ConfigError(
            f"database URL {redact_url(url)} is an in-memory SQLite database, which keeps nothing "
            "after the command: give a file (sqlite:////path/to/dreamer.db) or leave "
            "DREAMER_DATABASE_URL empty for the data dir's own"
        )
    kwargs: dict[str, Any] = {"echo": echo, "hide_parameters": True}
    if parsed.get_backend_name() == "sqlite":
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_SECONDS}
        if parsed.database and not parsed.database.startswith("file:"):
            _private_database(Path(parsed.database))
    else:
        kwargs["pool_pre_ping"] = True
    try:
        engine = create_engine(url, **kwargs)
    except (NoSuchModuleError, ImportError) as exc:
        raise ConfigError(f"unsupported database URL {redact_url(url)}: {exc}") from exc
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    _quiet_row_logging()
    return engine


class _NoRowDumps(logging.Filter):
    """Drops the fetched rows SQLAlchemy logs at DEBUG: rows carry transcript text."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(("Row ", "Col ")))


def _quiet_row_logging() -> None:
    engine_log = logging.getLogger("sqlalchemy.engine.Engine")
    if not any(isinstance(f, _NoRowDumps) for f in engine_log.filters):
        engine_log.addFilter(_NoRowDumps())


def _sqlite_pragmas(dbapi_conn: DBAPIConnection, _record: object) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={int(SQLITE_BUSY_SECONDS * 1000)}")
    when_unlocked(lambda: cur.execute("PRAGMA journal_mode=WAL"), SQLITE_BUSY_SECONDS)
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def when_unlocked(step: Callable[[], object], seconds: float, pause: float = 0.02) -> None:
    """Run `step`, again while SQLite says the database is locked, for up to `seconds`.

    Processes that open a new database at once all switch it to WAL; SQLite refuses all but one
    of them at once, without waiting on its busy timeout, and the switch is done when asked again.
    """
    deadline = time.monotonic() + seconds
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(pause)


def _parsed_url(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"bad database URL: {url!r}") from exc


def _private_database(path: Path) -> None:
    """The SQLite file's folder made 0700 and the file 0600 when they are created, whatever the
    umask (SQLite gives its journal and WAL files the database file's mode)."""
    private_dir(path.parent)
    private_file(path)


def in_memory_sqlite(parsed: URL) -> bool:
    """Whether a parsed URL names an in-memory SQLite database ("sqlite://", ":memory:", mode=memory)."""
    if parsed.get_backend_name() != "sqlite":
        return False
    database = parsed.database or ""
    uri_memory = (
        database.startswith("file::memory:") or "mode=memory" in database or parsed.query.get("mode") == "memory"
    )
    return database in ("", ":memory:") or uri_memory


def require_sqlite_file(url: str) -> None:
    """Refuse a SQLite URL whose file is not there (instead of creating an empty one on connect):
    reading a store that was never made is `StoreError`, with what to run."""
    parsed = _parsed_url(url)
    path = parsed.database if parsed.get_backend_name() == "sqlite" else None
    if path and path != ":memory:" and not path.startswith("file:") and not Path(path).exists():
        raise StoreError(f"no database at {path}: run `dreamer init`")


def database_problem(exc: SQLAlchemyError) -> str:
    """The driver's own first line ("attempt to write a readonly database"), without SQL or parameters."""
    orig = getattr(exc, "orig", None)
    text = str(orig if orig is not None else exc.__cause__ or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def redact_url(url: str) -> str:
    """The URL without its password, for display."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<invalid url>"


def conflict_insert(dialect: str) -> Upsert | None:
    """The dialect's `insert` that knows ON CONFLICT (PostgreSQL, SQLite), or None for others."""
    inserts: dict[str, Upsert] = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}
    return inserts.get(dialect)


def is_postgres(bind: Engine | Connection) -> bool:
    return bind.dialect.name == "postgresql"


def scrub_sqlite(engine: Engine) -> bool:
    """Leave no deleted row's bytes in a SQLite store's files: SQLite only marks a deleted row's
    space free (its bytes stay in the page until reused) and keeps older page versions in the
    write-ahead log, so the database is rebuilt (`VACUUM`) and the log emptied to zero bytes.
    False on another database (a server's files are its operator's) or when another process
    still reads and the log could not be emptied (the rows are gone from the tables all the same)."""
    if engine.dialect.name != "sqlite" or in_memory_sqlite(engine.url):
        return False
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM"))
        busy = conn.execute(text("PRAGMA wal_checkpoint(TRUNCATE)")).first()
    if busy is not None and busy[0]:
        log.warning("the SQLite write-ahead log is in use by another process: not emptied")
        return False
    return True


@contextmanager
def session_scope(engine: Engine) -> Iterator[DBSession]:
    """One transaction: commit on success, roll back on any error."""
    with DBSession(engine, expire_on_commit=False) as s:
        try:
            yield s
            s.commit()
        except BaseException:
            s.rollback()
            raise


def _alembic_dir() -> Path:
    package = Path(__file__).resolve().parents[1]  # dreamer/
    for candidate in (package / "migrations", package.parent / "alembic", Path.cwd() / "alembic"):
        if (candidate / "env.py").exists():
            return candidate
    raise StoreError("cannot find the Alembic migration scripts")


def alembic_config(engine: Engine) -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_alembic_dir()))
    cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to `revision`. Processes that upgrade one database at once take turns
    (`migration_lock`): the first migrates, the others find it done."""
    from alembic import command

    if revision in ("head", HEAD) and _require_known_revision(engine) == HEAD:
        return  # the common case, without waiting for a turn
    with migration_lock(engine):
        _require_known_revision(engine)
        command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    _check_reachable(engine)
    with migration_lock(engine):
        command.downgrade(alembic_config(engine), revision)


@contextmanager
def migration_lock(engine: Engine) -> Iterator[None]:
    """Held while the schema changes, so two processes never migrate one database at once: on
    SQLite an flock on a file beside the database, on PostgreSQL a session advisory lock."""
    parsed = engine.url
    if is_postgres(engine):
        with _advisory_lock(engine):
            yield
    elif (
        parsed.get_backend_name() == "sqlite"
        and parsed.database
        and not in_memory_sqlite(parsed)
        and not parsed.database.startswith("file:")
    ):
        with _file_lock(Path(parsed.database + MIGRATION_LOCK_SUFFIX)):
            yield
    else:
        yield


@contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    fd = os.open(private_file(path), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released by the system too when the process dies
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextmanager
def _advisory_lock(engine: Engine) -> Iterator[None]:
    _check_reachable(engine)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK_KEY})


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    _check_reachable(engine)
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def require_schema(engine: Engine) -> None:
    """Refuse to work on a database that `dreamer init` has not prepared."""
    rev = _require_known_revision(engine)
    if rev != HEAD:
        raise StoreError(
            f"database {redact_url(str(engine.url))} is at schema {rev or 'none'}, expected {HEAD}: run `dreamer init`"
        )


def _require_known_revision(engine: Engine) -> str | None:
    """The database's schema revision, refused when no migration of this version names it (a
    newer dreamer made it: `dreamer init` could not bring it back)."""
    from alembic.script import ScriptDirectory

    rev = current_revision(engine)
    if rev is None or rev == HEAD:
        return rev
    known = {s.revision for s in ScriptDirectory.from_config(alembic_config(engine)).walk_revisions()}
    if rev not in known:
        raise StoreError(
            f"database {redact_url(str(engine.url))} is at schema {rev}, which this version of dreamer "
            "does not know (a newer one made it): run that version, or upgrade dreamer"
        )
    return rev


def _check_reachable(engine: Engine) -> None:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except DatabaseError as exc:  # unreachable, refused, or a file that is not a database
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise StoreError(f"cannot reach database {redact_url(str(engine.url))}: {reason}") from exc
