"""Celery for real in tests: `celery -A workers.celery_app worker` subprocesses on Redis or
RabbitMQ against a PostgreSQL store and the scripted LLM server over HTTP. Each test has its
own queue, so stray workers never steal its tasks."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from conftest import AMQP_URL, REDIS_URL, need_service
from dreamkit import chat_bodies, extraction_script
from sqlmodel import select

from dreamer.core.models import Cursor, Memory, MemoryEvent, Session
from dreamer.core.settings import Settings
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store import db
from dreamer.store.db import session_scope
from workers.celery_app import make_app

ROOT = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"marker (s\d+)")
BROKERS = {
    "redis": ("Redis", 6379, REDIS_URL.rsplit("/", 1)[0] + "/5"),
    "rabbitmq": ("RabbitMQ", 5672, AMQP_URL),
}


def session_with(name: str, preference: str) -> list[dict]:
    lines = [f"I prefer {preference}.", f"marker {name}", "sure", "thanks"]
    out = []
    for i, line in enumerate(lines):
        out += [{"role": "user", "content": line}, {"role": "assistant", "content": f"reply {i}"}]
    return out


def requests_per_session(server) -> Counter:
    """Extraction requests by the session marker they carry."""
    found = Counter()
    for body in chat_bodies(server):
        found.update(set(MARKER.findall(body["messages"][-1]["content"])))
    return found


def wait_for(check, timeout: float, what: str, workers: Workers | None = None):
    """`check()`'s first true value within `timeout` seconds; else an AssertionError that carries
    the end of every worker's log, so a timeout in CI says what the workers were doing."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (workers.tails() if workers else ""))


@pytest.fixture(params=list(BROKERS))
def broker(request) -> str:
    name, port, url = BROKERS[request.param]
    need_service(name, "127.0.0.1", port)
    return url


@pytest.fixture
def store(pg_url):
    engine = db.make_engine(pg_url)
    db.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        srv.set_script(extraction_script())
        yield srv


class Workers:
    """Worker subprocesses (each in its own process group), all gone at teardown whatever happens."""

    def __init__(self, tmp_path: Path, env: dict, queue: str) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.queue = queue
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str) -> None:
        log = self.tmp_path / f"{name}.log"
        self.logs[name] = log
        cmd = [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.celery_app",
            "worker",
            "-Q",
            self.queue,
            "--pool=prefork",
            "-c",
            "1",
            "-n",
            f"{name}-{self.queue}@%h",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            "-l",
            "INFO",
        ]
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(
                cmd, env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, *names: str) -> None:
        for name in names:
            wait_for(lambda name=name: " ready." in self.log(name) or self._died(name), 60, f"worker {name}")
            assert self.procs[name].poll() is None, self.log(name)

    def _died(self, name: str) -> bool:
        return self.procs[name].poll() is not None

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def tails(self, lines: int = 40) -> str:
        return "".join(
            f"\n--- worker {name}, last {lines} lines:\n" + "\n".join(self.log(name).splitlines()[-lines:])
            for name in self.logs
        )

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[name]
        if proc.poll() is None:
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for name, proc in self.procs.items():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=15)


@pytest.fixture
def celery_setup(tmp_path, broker, store, server):
    queue = f"dreamer-test-{uuid.uuid4().hex[:10]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DREAMER_")}
    env.update(
        {
            "DREAMER_DATABASE_URL": str(store.url.render_as_string(hide_password=False)),
            "DREAMER_DATA_DIR": str(tmp_path / "data"),
            "DREAMER_LLM_BASE_URL": server.url,
            "DREAMER_EMBEDDER": "none",
            "DREAMER_BROKER_URL": broker,
            "DREAMER_RESULT_BACKEND": "",
            "DREAMER_CELERY_QUEUE": queue,
            "DREAMER_LEASE_SECONDS": "3",
            "DREAMER_CELERY_VISIBILITY_TIMEOUT_SECONDS": "2",
            "DREAMER_TASK_RETRY_BASE_SECONDS": "0.2",
            "DREAMER_TASK_RETRY_CAP_SECONDS": "1",
            "DREAMER_BUSY_BACKEND": "sql",
        }
    )
    settings = Settings(_env_file=None, broker_url=broker, result_backend="", celery_queue=queue)
    app = make_app(settings)
    workers = Workers(tmp_path, env, queue)
    try:
        yield app, workers, queue
    finally:
        workers.stop_all()
        _drop_queue(app, queue)


def _drop_queue(app, queue: str) -> None:
    with app.connection_for_write() as conn:
        conn.default_channel.queue_delete(queue)


def processed(engine) -> dict[str, tuple[int, int]]:
    with session_scope(engine) as s:
        rows = s.exec(
            select(Session.external_id, Session.last_seq, Cursor.processed_seq).join(
                Cursor, Cursor.session_id == Session.id
            )
        )
        return {ext: (last, done) for ext, last, done in rows}


def all_done(engine) -> bool:
    return all(last == done for last, done in processed(engine).values())


def memories(engine) -> list[Memory]:
    with session_scope(engine) as s:
        return list(s.exec(select(Memory)).all())


def events(engine) -> Counter:
    with session_scope(engine) as s:
        return Counter(e.event for e in s.exec(select(MemoryEvent)))
