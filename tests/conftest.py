"""Shared fixtures: real SQLite and PostgreSQL stores, settings rooted in a temp folder."""

from __future__ import annotations

import os
import socket
import uuid

import pytest
from sqlalchemy import text

from dreamer.core.settings import Settings
from dreamer.store import db

PG_ADMIN_URL = os.environ.get("DREAMER_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("DREAMER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("DREAMER_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")


def services_required() -> bool:
    return os.environ.get("DREAMER_REQUIRE_SERVICES") == "1"


def need_service(name: str, host: str, port: int) -> None:
    """Skip when a service is absent, fail when DREAMER_REQUIRE_SERVICES=1."""
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return
    except OSError as exc:
        message = f"{name} not reachable at {host}:{port}: {exc}"
    if services_required():
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(_env_file=None, data_dir=tmp_path / "data")


@pytest.fixture
def pg_url():
    """A fresh PostgreSQL database for one test, dropped afterwards."""
    need_service("PostgreSQL", "127.0.0.1", 5432)
    name = f"dreamer_t_{uuid.uuid4().hex[:12]}"
    admin = db.make_engine(PG_ADMIN_URL)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_url")


@pytest.fixture
def engine(db_url):
    """A migrated store on SQLite and on PostgreSQL."""
    eng = db.make_engine(db_url)
    db.upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def sqlite_engine(tmp_path):
    eng = db.make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    db.upgrade(eng)
    yield eng
    eng.dispose()


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory):
    """SmolLM2-135M-Instruct served by `python -m llama_cpp.server` for the whole session; skipped
    without the `realmodel` extra, failed instead when DREAMER_REQUIRE_SERVICES=1."""
    from realmodelkit import SmolLM2Server, missing

    why = missing()
    if why is not None:
        if services_required():
            pytest.fail(why)
        pytest.skip(why)
    server = SmolLM2Server(tmp_path_factory.mktemp("llama-server")).start()
    yield server
    server.stop()


@pytest.fixture
def scripted():
    """The scripted OpenAI-compatible server, embedding in 64 dimensions."""
    from dreamer.llm.scripted.server import ScriptedServer

    with ScriptedServer(embed_dim=64) as srv:
        yield srv
