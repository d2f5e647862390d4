"""Long work shows how far it has come: a pass tells its sessions and model calls as they go
(`PassStep`), and `dream` draws them as a bar on stderr only when stderr is a terminal."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys

from clikit import run, write_chat
from dreamkit import extraction_script, make_index, make_runtime

from dreamer.engine.dream import dream_pass
from dreamer.engine.runs import PassStep
from dreamer.eval.model_eval import eval_model
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer


def said(line: str) -> list[dict]:
    return [{"role": "user", "content": line}, {"role": "assistant", "content": "Noted."}]


def test_a_pass_tells_its_sessions_and_calls_as_they_go(settings, sqlite_engine, tmp_path):
    st = settings.model_copy(update={"min_rounds": 1, "sessions_per_call": 1})
    record_messages(sqlite_engine, "s1", said("I prefer green tea in the morning."), user_id="alice")
    record_messages(sqlite_engine, "s2", said("I prefer oat milk in my coffee."), user_id="bob")
    steps: list[PassStep] = []
    with ScriptedServer(extraction_script()) as srv:
        rt = make_runtime(st, sqlite_engine, srv, make_index("edge", tmp_path))
        try:
            run_row = dream_pass(rt, force=True, on_step=steps.append)
        finally:
            rt.close()
    assert [(s.sessions, s.total, s.calls) for s in steps] == [(0, 2, 0), (0, 2, 1), (1, 2, 1), (1, 2, 2), (2, 2, 2)]
    assert steps[-1].tokens == run_row.prompt_tokens + run_row.completion_tokens > 0
    assert [s.tokens for s in steps] == sorted(s.tokens for s in steps)


def test_dream_draws_a_bar_on_a_terminal_and_nothing_into_a_pipe(tmp_path):
    for name, drink in (("a", "green tea"), ("b", "oat milk")):
        write_chat(tmp_path / f"{name}.jsonl", ("user", f"I prefer {drink}."), ("assistant", "Noted."))
        assert run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "alice").returncode == 0
    with ScriptedServer(extraction_script()) as srv:
        env = {"DREAMER_LLM_BASE_URL": srv.url, "DREAMER_LLM_MODEL": "scripted", "DREAMER_SESSIONS_PER_CALL": "1"}
        piped = run(tmp_path, "dream", "--force", env=env)
        assert (piped.returncode, piped.stderr) == (0, "")
        for name, drink in (("c", "rooibos"), ("d", "soy milk")):
            write_chat(tmp_path / f"{name}.jsonl", ("user", f"I prefer {drink}."), ("assistant", "Noted."))
            assert run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "alice").returncode == 0
        code, drawn = on_a_terminal(tmp_path, ["dream", "--force"], env)
    assert code == 0
    frames = [f for f in drawn.split("\r\x1b[2K") if "sessions" in f]
    last = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", frames[-1])
    assert last.startswith("sessions · LLM 4 call(s), ")  # two extractions, and two pairs judged
    assert " 2/2 " in last


def on_a_terminal(tmp_path, args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal; its exit code and what it drew there."""
    leader, follower = pty.openpty()
    e = {**os.environ, "DREAMER_DATA_DIR": str(tmp_path / "data"), "DREAMER_EMBEDDER": "none", **env}
    e.update({"TERM": "xterm", "COLUMNS": "160"})
    e.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "dreamer", *args], env=e, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=follower
    )
    os.close(follower)
    drawn = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        drawn += chunk
    os.close(leader)
    return proc.wait(timeout=120), drawn.decode(errors="replace")


def test_eval_model_tells_the_whole_run_not_each_pass(settings, tmp_path):
    data = tmp_path / "chats.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"I prefer {thing}."}, {"role": "assistant", "content": "Ok."}]}
        for thing in ("green tea", "aisle seats", "dark mode")
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    steps: list[PassStep] = []
    with ScriptedServer(extraction_script()) as srv:
        st = settings.model_copy(update={"llm_base_url": srv.url, "llm_model": "scripted", "embedder": "none"})
        result = eval_model(st, data, sessions=3, on_step=steps.append)
    shown = [(s.sessions, s.total, s.calls) for s in steps]
    assert shown == [(0, 3, 0), (0, 3, 1), (1, 3, 1), (1, 3, 1), (1, 3, 2), (2, 3, 2), (2, 3, 2), (2, 3, 3), (3, 3, 3)]
    assert steps[-1].tokens == result["prompt_tokens"] + result["completion_tokens"]
