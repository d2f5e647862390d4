"""A call that times out is billed what the server reported for it: the pass's bill held against
a recording proxy in front of the scripted server that holds one answer back past the timeout."""

from __future__ import annotations

import json

import pytest
from clikit import run, write_chat
from dreamkit import extraction_script
from usagekit import UsageProxy

from dreamer.cli.passes import bill_text
from dreamer.llm.scripted.server import ScriptedServer

TIMEOUT = 2.0  # DREAMER_LLM_TIMEOUT; a timed-out request is still read until twice that


@pytest.fixture
def sessions(tmp_path):
    for name, drink in (("a", "green tea"), ("b", "oat milk")):
        write_chat(tmp_path / f"{name}.jsonl", ("user", f"I prefer {drink} in the morning."), ("assistant", "Noted."))
        assert run(tmp_path, "ingest", str(tmp_path / f"{name}.jsonl"), "--user", "alice").returncode == 0


def dream_through(tmp_path, delay: float) -> tuple[dict, UsageProxy]:
    with ScriptedServer(extraction_script()) as srv, UsageProxy(srv.url, delays=[delay]) as proxy:
        env = {
            "DREAMER_LLM_BASE_URL": proxy.url,
            "DREAMER_LLM_MODEL": "scripted",
            "DREAMER_LLM_TIMEOUT": str(TIMEOUT),
            "DREAMER_MIN_ROUNDS": "1",
            "DREAMER_SESSIONS_PER_CALL": "1",
        }
        proc = run(tmp_path, "dream", "--force", "--json", env=env)
    assert proc.returncode == 1, proc.stderr  # the session whose call timed out failed
    return json.loads(proc.stdout), proxy


def test_a_reply_past_the_timeout_is_billed_what_the_server_reported(tmp_path, sessions):
    record, proxy = dream_through(tmp_path, delay=TIMEOUT + 1.0)  # answered before the request is given up
    assert (record["prompt_tokens"], record["completion_tokens"]) == proxy.total()
    assert (record["unbilled_calls"], record["failed_sessions"], record["sessions"]) == (0, 1, 1)
    assert record["llm_calls"] == len(proxy.usages) == 2


def test_a_reply_never_read_is_billed_its_counted_prompt_and_the_bill_is_a_floor(tmp_path, sessions):
    record, proxy = dream_through(tmp_path, delay=2 * TIMEOUT + 2.0)  # past the time it is read for
    prompt, completion = proxy.total()
    late = proxy.usages[0]
    assert (record["prompt_tokens"], record["completion_tokens"]) == (prompt, completion - late["completion_tokens"])
    assert (record["unbilled_calls"], record["failed_sessions"], record["llm_calls"]) == (1, 1, 2)


def test_the_bill_says_at_least_when_a_call_never_reported_its_usage():
    assert bill_text(6880, 216, 0) == "6880+216 tokens"
    assert bill_text(6880, 216, 1) == (
        "at least 6880+216 tokens (1 timed-out call(s) never reported their usage: each is billed its prompt as counted)"
    )
