import pytest
from dreamkit import ManualClock

from dreamer.core.errors import CircuitOpen, LLMError
from dreamer.llm.breaker import CLOSED, OPEN, PROBE, Breaker, breaker_state


@pytest.mark.parametrize(
    ("failures", "threshold", "opened_at", "now", "cooldown", "state"),
    [
        (0, 3, None, 0.0, 60.0, CLOSED),
        (2, 3, None, 0.0, 60.0, CLOSED),
        (3, 3, 100.0, 100.0, 60.0, OPEN),
        (3, 3, 100.0, 159.9, 60.0, OPEN),
        (3, 3, 100.0, 160.0, 60.0, PROBE),
        (9, 3, 100.0, 1e9, None, OPEN),  # no cool-down: open for good
        (9, 0, 100.0, 100.0, 60.0, CLOSED),  # threshold 0: never opens
        (3, 3, 100.0, 100.0, 0.0, PROBE),  # a zero cool-down lets the next call try at once
    ],
)
def test_breaker_state(failures, threshold, opened_at, now, cooldown, state):
    assert breaker_state(failures, threshold, opened_at, now, cooldown) == state


def fail():
    raise LLMError("HTTP 503")


def test_it_opens_after_the_threshold_and_refuses_without_calling():
    clock, calls = ManualClock(), []
    breaker = Breaker(2, cooldown_seconds=60, clock=clock)
    for _ in range(2):
        with pytest.raises(LLMError):
            breaker.call(fail)
    with pytest.raises(CircuitOpen, match="2 consecutive LLM failures, last: LLMError: HTTP 503"):
        breaker.call(lambda: calls.append(1))
    assert calls == []


def opened() -> tuple[ManualClock, Breaker]:
    """A breaker of threshold 1 that one failed call has just opened, and its clock."""
    clock = ManualClock(1000.0)
    breaker = Breaker(1, cooldown_seconds=60, clock=clock)
    with pytest.raises(LLMError):
        breaker.call(fail)
    return clock, breaker


def test_after_the_cool_down_one_call_tries_and_its_success_closes_it():
    clock, breaker = opened()
    clock.now += 60
    breaker.check()  # the probe goes
    with pytest.raises(CircuitOpen):
        breaker.check()  # a second call while the probe is out is refused
    breaker.succeeded()
    assert breaker.call(lambda: "ok") == "ok"
    assert (breaker.failures, breaker.open_reason) == (0, None)


def test_a_failed_probe_opens_it_for_another_cool_down():
    clock, breaker = opened()
    clock.now += 61
    with pytest.raises(LLMError):
        breaker.call(fail)
    clock.now += 59
    with pytest.raises(CircuitOpen, match="2 consecutive"):
        breaker.check()
    clock.now += 1
    assert breaker.call(lambda: "ok") == "ok"


def test_a_success_between_failures_resets_the_count():
    breaker = Breaker(2, cooldown_seconds=60, clock=ManualClock())
    with pytest.raises(LLMError):
        breaker.call(fail)
    breaker.call(lambda: None)
    with pytest.raises(LLMError):
        breaker.call(fail)
    breaker.check()  # one failure in a row: still closed
    assert breaker.failures == 1


def test_only_llm_errors_count():
    breaker = Breaker(1, clock=ManualClock())
    with pytest.raises(ValueError):
        breaker.call(lambda: int("x"))
    breaker.check()
    assert breaker.failures == 0


def test_only_the_probe_frees_the_probe():
    clock, breaker = opened()
    clock.now += 60
    assert breaker.check() is True  # this call is the probe
    breaker.released(False)  # a call that was no probe ends without a verdict
    with pytest.raises(CircuitOpen):
        breaker.check()  # the probe is still out: no second one
    breaker.released(True)
    assert breaker.check() is True  # now the next call may probe


def test_refusing_is_a_read_that_takes_no_probe():
    clock, breaker = opened()
    assert breaker.refusing() is True
    clock.now += 60
    assert breaker.refusing() is False
    assert breaker.refusing() is False  # asking twice took nothing
    assert breaker.check() is True  # the probe is still there to take
    assert breaker.refusing() is True


def test_a_probe_ended_by_another_error_lets_the_next_call_probe():
    clock, breaker = opened()
    clock.now += 60
    with pytest.raises(ValueError):
        breaker.call(lambda: int("x"))
    assert breaker.call(lambda: "ok") == "ok"
