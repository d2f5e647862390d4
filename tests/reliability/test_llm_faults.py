"""The LLM fault matrix, through the scripted server and the real openai client: for each fault
the client retries as its policy says, the cursor stays put on the final failure, a session
whose request the model cannot answer (or not in time, while it answers others) is quarantined
after `max_attempts` while an outage quarantines nothing (the session is dreamed once the
endpoint is back), the circuit breaker
stops the pass and says why, the token budget holds, and nothing is written from an invalid
response."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from dreamkit import extraction_script, is_judgement
from sqlmodel import select

from dreamer.core.models import Cursor, MemoryEvent
from dreamer.engine.dream import dream_pass
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.store.db import session_scope

from . import kit

pytestmark = pytest.mark.reliability

MAX_RETRIES = 2
MAX_ATTEMPTS = 3
BREAKER = 2
TIMEOUT = 0.4  # the read-timeout fault's client timeout
PATIENT = 30.0  # every other fault's: a slow machine must not turn its fault into a timeout
BUDGET = 50_000
VALID = {"memories": [{"kind": "preference", "text": "The user prefers red.", "importance": 0.5, "seqs": [1]}]}


@dataclass(frozen=True)
class Fault:
    name: str
    reply: Reply
    transient: bool  # retried with backoff; otherwise invalid output, repaired once
    says: str  # what the cursor's last error and the run's stop reason mention
    retry_after: float | None = None
    timeout: float = PATIENT

    @property
    def requests_per_attempt(self) -> int:
        """A timed-out request is not sent again (the server may still be at it); other transient
        faults are retried; invalid output is repaired once."""
        if self.timed_out:
            return 1
        return MAX_RETRIES + 1 if self.transient else 2

    @property
    def timed_out(self) -> bool:
        return self.timeout != PATIENT

    @property
    def counted(self) -> int:
        """What one failed pass adds to the session's attempts while the endpoint answers other
        requests: an outage is not the session's fault, output the model cannot make valid is,
        and so is a request it cannot answer in time."""
        return 1 if self.timed_out or not self.transient else 0

    @property
    def counted_in_outage(self) -> int:
        """The same when the endpoint answers nothing else (here: the breaker opened)."""
        return 0 if self.transient else 1

    def probes(self, others_answered: bool) -> int:
        """Requests a pass adds to ask whether the endpoint answers, after a timeout."""
        return 1 if self.timed_out and not others_answered else 0


FAULTS = [
    Fault("500", Reply.error(500), True, "HTTP 500"),
    Fault("502", Reply.error(502), True, "HTTP 502"),
    Fault("503", Reply.error(503), True, "HTTP 503"),
    Fault("503 Retry-After", Reply.error(503, retry_after=3), True, "HTTP 503", 3.0),
    Fault("429", Reply.error(429), True, "HTTP 429"),
    Fault("429 Retry-After", Reply.error(429, retry_after=2), True, "HTTP 429", 2.0),
    Fault("read timeout", Reply.delay(TIMEOUT * 4, Reply.json(VALID)), True, "APITimeoutError", timeout=TIMEOUT),
    Fault("connection reset", Reply.drop(), True, "APIConnectionError"),
    Fault("malformed JSON", Reply.malformed(), False, "not JSON"),
    Fault(
        "wrong schema",
        Reply.json({"memories": [{"kind": "favourite_colour", "text": 42, "seqs": "1"}]}),
        False,
        "memories[0]",
    ),
    Fault("truncated", Reply.truncated(VALID), False, "truncated"),
    Fault("empty choices", Reply.empty_choices(), False, "no choices"),
    Fault("refusal", Reply.refusal("I can't help with that."), False, "refused"),
]


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=kit.DIM) as srv:
        srv.set_script(extraction_script())
        yield srv


@pytest.fixture
def fault_settings(settings):
    return settings.model_copy(
        update={
            "max_attempts": MAX_ATTEMPTS,
            "llm_breaker_threshold": BREAKER,
            "llm_pass_token_budget": BUDGET,
            "min_rounds": 1,
        }
    )


def chat_count(server) -> int:
    return len(kit.chat_bodies(server))


def user_events(engine, user_id: str) -> list[MemoryEvent]:
    ids = {m.id for m in kit.memories(engine, user_id)}
    with session_scope(engine) as s:
        return [e for e in s.exec(select(MemoryEvent)).all() if e.memory_id in ids]


@pytest.mark.parametrize("fault", FAULTS, ids=lambda f: f.name)
def test_fault(fault, fault_settings, sqlite_engine, server, tmp_path, figures):
    sleeps: list[float] = []
    st = fault_settings.model_copy(update={"llm_timeout": fault.timeout})
    rt = kit.runtime(st, sqlite_engine, server, tmp_path, max_retries=MAX_RETRIES, sleeps=sleeps)
    try:
        row = _retry_and_quarantine(rt, server, fault, sleeps)
        row["breaker opened on"] = _breaker(rt, server, fault)
    finally:
        rt.close()
    figures(f"fault {fault.name}", json.dumps(row))


def _retry_and_quarantine(rt, server, fault: Fault, sleeps: list[float]) -> dict:
    engine = rt.engine
    bad = record_messages(engine, "bad", kit.session_with("I prefer red."), user_id="alice").session_id
    good = record_messages(engine, "good", kit.session_with("I prefer blue."), user_id="bob").session_id
    n = fault.requests_per_attempt
    for attempt in range(1, MAX_ATTEMPTS + 1):
        before, slept = chat_count(server), len(sleeps)
        server.push(fault.reply.times(n))
        run = dream_pass(rt)
        c = kit.cursor(engine, bad)
        assert (c.processed_seq, c.attempts) == (0, attempt * fault.counted), (
            "a failed call leaves the cursor where it was"
        )
        assert c.status == ("quarantined" if c.attempts == MAX_ATTEMPTS else "failed")
        assert fault.says in c.last_error, c.last_error
        assert (run.status, run.failed_sessions) == ("partial", 1)
        assert run.prompt_tokens + run.completion_tokens <= BUDGET
        first = attempt == 1  # the good session is dreamed once, in the first pass
        assert chat_count(server) - before == n + (1 if first else 0) + fault.probes(others_answered=first)
        _check_waits(fault, sleeps[slept:])
        assert kit.memories(engine, "alice") == [] and user_events(engine, "alice") == []
    assert kit.cursor(engine, good).processed_seq == 8
    assert [m.text for m in kit.memories(engine, "bob")] == ["The user prefers blue."]
    before = chat_count(server)
    quiet = dream_pass(rt)
    if fault.counted:
        assert (quiet.sessions, quiet.llm_calls, chat_count(server) - before) == (0, 0, 0), "quarantine holds"
    else:
        assert (quiet.sessions, quiet.llm_calls, chat_count(server) - before) == (1, 1, 1), "dreamed after the outage"
        assert [m.text for m in kit.memories(engine, "alice")] == ["The user prefers red."]
    return {
        "requests/attempt": n,
        "waits": [round(w, 2) for w in sleeps[:MAX_RETRIES]],
        "quarantined after": MAX_ATTEMPTS if fault.counted else "never",
        "written": 0 if fault.counted else 1,
    }


def _check_waits(fault: Fault, waits: list[float]) -> None:
    if not fault.transient or fault.timed_out:
        assert waits == [], "invalid output is repaired at once, a timeout not sent again: no wait"
        return
    assert len(waits) == MAX_RETRIES
    for attempt, wait in enumerate(waits, start=1):
        ceiling = min(4.0, 0.5 * 2 ** (attempt - 1))
        if fault.retry_after is not None:
            assert wait >= fault.retry_after, "Retry-After is a floor"
        else:
            assert 0 <= wait <= ceiling, "full-jitter backoff under its ceiling"


def _breaker(rt, server, fault: Fault) -> str:
    engine = rt.engine
    ids = [
        record_messages(engine, f"b{i}", kit.session_with("I prefer green."), user_id=f"u{i}").session_id
        for i in range(BREAKER + 1)
    ]
    before = chat_count(server)
    if not fault.transient:  # the endpoint answered every time: a weak reply never opens the breaker
        server.push(fault.reply.times(fault.requests_per_attempt * (BREAKER + 1)))
        run = dream_pass(rt)
        assert (run.status, run.failed_sessions) == ("partial", BREAKER + 1)
        assert chat_count(server) - before == fault.requests_per_attempt * (BREAKER + 1)
        assert [kit.cursor(engine, i).attempts for i in ids] == [1] * (BREAKER + 1)
        return "never"
    server.push(fault.reply.times(fault.requests_per_attempt * BREAKER))  # the third is never asked
    run = dream_pass(rt)
    assert run.status == "stopped"
    assert f"{BREAKER} consecutive LLM failures" in run.error and fault.says in run.error, run.error
    assert chat_count(server) - before == fault.requests_per_attempt * BREAKER, "no call after the breaker opens"
    assert [kit.cursor(engine, i).attempts for i in ids] == [fault.counted_in_outage] * BREAKER + [0]
    assert all(kit.cursor(engine, i).processed_seq == 0 for i in ids)
    assert server.pending == 0
    return run.error.split("last: ", 1)[-1][:70]


def test_a_timeout_is_not_counted_while_the_endpoint_answers_nothing(fault_settings, sqlite_engine, server, tmp_path):
    """The session's call times out and so does the probe after it: an outage, not the session."""
    rt = kit.runtime(
        fault_settings.model_copy(update={"llm_timeout": TIMEOUT}), sqlite_engine, server, tmp_path, max_retries=0
    )
    try:
        sid = record_messages(rt.engine, "s1", kit.session_with("I prefer red."), user_id="alice").session_id
        server.push(Reply.delay(TIMEOUT * 4, Reply.json(VALID)).times(2))  # the session's call, then the probe
        run = dream_pass(rt)
        c = kit.cursor(rt.engine, sid)
        assert (run.status, run.failed_sessions, chat_count(server)) == ("partial", 1, 2)
        assert (c.attempts, c.status, c.processed_seq) == (0, "failed", 0)
        assert c.last_error.startswith("LLMTimeout: ") and "counted" not in c.last_error, c.last_error
        again = dream_pass(rt)  # the endpoint is back
        assert (again.sessions, kit.cursor(rt.engine, sid).attempts) == (1, 0)
        assert [m.text for m in kit.memories(rt.engine, "alice")] == ["The user prefers red."]
    finally:
        rt.close()


SLOW = Reply.delay(TIMEOUT * 4, Reply.json(VALID))


def is_probe(body: dict) -> bool:
    return (body.get("response_format") or {}).get("json_schema", {}).get("name") == "probe"


def timeout_runtime(fault_settings, engine, server, tmp_path):
    return kit.runtime(
        fault_settings.model_copy(update={"llm_timeout": TIMEOUT, "llm_breaker_threshold": 5}),
        engine,
        server,
        tmp_path,
        max_retries=0,
    )


def test_an_outage_that_begins_mid_pass_counts_nothing(fault_settings, sqlite_engine, server, tmp_path):
    """The endpoint answered the first session, then nothing: the timeouts after it are an outage."""
    rt = timeout_runtime(fault_settings, sqlite_engine, server, tmp_path)
    try:
        ids = [
            record_messages(rt.engine, f"s{i}", kit.session_with("I prefer red."), user_id=f"u{i}").session_id
            for i in range(3)
        ]
        server.push(Reply.json(VALID), SLOW.times(3))  # s0 answered; s1, s2 and the probe time out
        run = dream_pass(rt)
        assert (run.sessions, run.failed_sessions, chat_count(server)) == (1, 2, 4)
        assert [kit.cursor(rt.engine, i).attempts for i in ids] == [0, 0, 0]
        assert [kit.cursor(rt.engine, i).status for i in ids] == ["ok", "failed", "failed"]
    finally:
        rt.close()


def test_a_timeout_is_counted_only_while_the_cursor_still_holds_it(fault_settings, sqlite_engine, server, tmp_path):
    """Another worker dreams the session while the probe is on its way: the count is dropped."""
    rt = timeout_runtime(fault_settings, sqlite_engine, server, tmp_path)
    try:
        sid = record_messages(rt.engine, "s1", kit.session_with("I prefer red."), user_id="alice").session_id
        script = extraction_script()

        def answer(body: dict) -> Reply:
            if is_probe(body):
                with session_scope(rt.engine) as s:  # what a worker that dreamed it meanwhile leaves
                    cursor = s.get(Cursor, sid)
                    cursor.status, cursor.processed_seq, cursor.last_error = "ok", 8, None
                    s.add(cursor)
            return script(body)

        server.set_script(answer)
        server.push(SLOW)
        dream_pass(rt)
        c = kit.cursor(rt.engine, sid)
        assert (c.status, c.attempts, c.processed_seq, c.last_error) == ("ok", 0, 8, None)
        assert [is_probe(b) for b in kit.chat_bodies(server)] == [False, True]
    finally:
        rt.close()


def test_a_pass_told_to_stop_sends_no_probe(fault_settings, sqlite_engine, server, tmp_path):
    rt = timeout_runtime(fault_settings, sqlite_engine, server, tmp_path)
    try:
        ids = [
            record_messages(rt.engine, f"s{i}", kit.session_with("I prefer red."), user_id=f"u{i}").session_id
            for i in range(2)
        ]
        server.push(SLOW)
        run = dream_pass(rt, stop=lambda: chat_count(server) > 0)  # asked to stop after the first session
        assert (run.error, chat_count(server)) == ("stopped on request", 1)
        assert [(kit.cursor(rt.engine, i).status, kit.cursor(rt.engine, i).attempts) for i in ids] == [
            ("failed", 0),
            ("ok", 0),
        ]
    finally:
        rt.close()


def test_a_failure_in_a_later_chunk_writes_nothing_for_the_session(settings, sqlite_engine, server, tmp_path):
    st = settings.model_copy(update={"chunk_tokens": 60, "min_rounds": 1, "llm_breaker_threshold": 5})
    rt = kit.runtime(st, sqlite_engine, server, tmp_path)
    try:
        lines = [f"I prefer colour number {i} for the kitchen walls and the hallway." for i in range(6)]
        sid = record_messages(rt.engine, "long", kit.session_with(*lines, rounds=6), user_id="alice").session_id
        server.set_script(None)
        server.push(Reply.json(VALID), Reply.error(500).times(MAX_RETRIES + 1))
        run = dream_pass(rt)
        assert len(kit.chat_bodies(server)) == 1 + MAX_RETRIES + 1, "the first chunk succeeded, the second failed"
        assert run.failed_sessions == 1
        assert kit.cursor(rt.engine, sid).processed_seq == 0
        assert kit.memories(rt.engine) == [] and kit.events(rt.engine) == []
    finally:
        rt.close()


def test_a_failed_judgement_writes_nothing_for_the_session(settings, sqlite_engine, server, tmp_path):
    st = settings.model_copy(update={"min_rounds": 1, "ambiguous_low": 0.3, "dup_threshold": 0.99})
    rt = kit.runtime(st, sqlite_engine, server, tmp_path)
    try:
        record_messages(rt.engine, "s1", kit.session_with("I prefer tea with breakfast."), user_id="alice")
        dream_pass(rt)
        sid = record_messages(
            rt.engine, "s2", kit.session_with("I prefer coffee with breakfast."), user_id="alice"
        ).session_id
        before = len(kit.events(rt.engine))
        script = extraction_script()
        server.set_script(lambda body: Reply.malformed() if is_judgement(body) else script(body))
        run = dream_pass(rt)
        assert run.failed_sessions == 1
        assert kit.cursor(rt.engine, sid).processed_seq == 0
        assert len(kit.events(rt.engine)) == before
        assert [m.text for m in kit.memories(rt.engine)] == ["The user prefers tea with breakfast."]
    finally:
        rt.close()


def test_the_token_budget_stops_the_pass_before_it_is_overrun(settings, sqlite_engine, server, tmp_path, figures):
    probe = kit.runtime(settings.model_copy(update={"min_rounds": 1}), sqlite_engine, server, tmp_path / "probe")
    record_messages(probe.engine, "p", kit.session_with("I prefer red."), user_id="probe")
    dream_pass(probe)
    probe.close()
    per_call = kit.tokens_billed(server)
    budget = int(per_call * 3.5)
    st = settings.model_copy(update={"min_rounds": 1, "llm_pass_token_budget": budget})
    rt = kit.runtime(st, sqlite_engine, server, tmp_path)
    try:
        for i in range(8):
            record_messages(rt.engine, f"s{i}", kit.session_with(f"I prefer shade {i}."), user_id=f"u{i}")
        billed_before = kit.tokens_billed(server)
        run = dream_pass(rt)
        spent = kit.tokens_billed(server) - billed_before
    finally:
        rt.close()
    figures("budget: tokens spent / budget", f"{spent} / {budget}", f"{run.sessions} sessions, then: {run.error}")
    assert run.status == "stopped" and "token budget" in run.error
    assert spent == run.prompt_tokens + run.completion_tokens
    assert spent <= budget
    assert 0 < run.sessions < 8
