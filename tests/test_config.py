"""Settings read at the edge: a bad value is one ConfigError naming its variable."""

from __future__ import annotations

import pytest

from dreamer.core.errors import ConfigError
from dreamer.core.settings import Settings, load_settings


def test_load_settings_takes_the_environment_and_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("DREAMER_RECALL_K", "7")
    st = load_settings(data_dir=tmp_path)
    assert (st.recall_k, st.data_dir) == (7, tmp_path)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        (
            "DREAMER_RECALL_K",
            "abc",
            "DREAMER_RECALL_K: Input should be a valid integer, unable to parse string as an integer",
        ),
        ("DREAMER_RECALL_K", "0", "DREAMER_RECALL_K: Input should be greater than or equal to 1"),
        ("DREAMER_CONTEXT_BUDGET", "-1", "DREAMER_CONTEXT_BUDGET: Input should be greater than or equal to 0"),
        ("DREAMER_EMBEDDER", "foo", "DREAMER_EMBEDDER: Input should be 'auto', 'local', 'openai' or 'none'"),
        ("DREAMER_LEASE_SECONDS", "0", "DREAMER_LEASE_SECONDS: Input should be greater than 0"),
        (
            "DREAMER_DATA_DIR",
            "",
            "DREAMER_DATA_DIR: Value error, must name a folder (empty would put the store in the working directory)",
        ),
        ("DREAMER_MAX_AGE_DAYS", "1000000", "DREAMER_MAX_AGE_DAYS: Input should be less than or equal to 36600"),
        ("DREAMER_CHUNK_TOKENS", "0", "DREAMER_CHUNK_TOKENS: Input should be greater than or equal to 1"),
        ("DREAMER_DENSE_WEIGHT", "inf", "DREAMER_DENSE_WEIGHT: Input should be a finite number"),
        ("DREAMER_DATE_WEIGHT", "nan", "DREAMER_DATE_WEIGHT: Input should be a finite number"),
        (
            "DREAMER_REDIS_URL",
            "127.0.0.1:6379",
            "DREAMER_REDIS_URL: Value error, must be a redis://, rediss:// or unix:// URL",
        ),
        (
            "DREAMER_TIMEZONE",
            "Mars/Base",
            "DREAMER_TIMEZONE: Value error, unknown time zone 'Mars/Base' (an IANA name such as UTC or Europe/Oslo)",
        ),
    ],
)
def test_a_bad_value_names_its_variable(monkeypatch, variable, value, message):
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("dup", "low", "message"),
    [
        (
            "-1",
            "-2",
            "DREAMER_DUP_THRESHOLD: Input should be greater than or equal to 0; "
            "DREAMER_AMBIGUOUS_LOW: Input should be greater than or equal to 0",
        ),
        ("1.5", "0.5", "DREAMER_DUP_THRESHOLD: Input should be less than or equal to 1"),
        ("0.9", "2", "DREAMER_AMBIGUOUS_LOW: Input should be less than or equal to 1"),
        ("nan", "0.5", "DREAMER_DUP_THRESHOLD: Input should be a finite number"),
        ("0.6", "0.8", "DREAMER_AMBIGUOUS_LOW: Value error, must be at most DREAMER_DUP_THRESHOLD (0.6), got 0.8"),
        ("x", "0.95", "DREAMER_DUP_THRESHOLD: Input should be a valid number, unable to parse string as a number"),
    ],
)
def test_similarity_thresholds_lie_in_0_1_with_the_ambiguous_band_below_the_merge(monkeypatch, dup, low, message):
    monkeypatch.setenv("DREAMER_DUP_THRESHOLD", dup)
    monkeypatch.setenv("DREAMER_AMBIGUOUS_LOW", low)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == message


def test_the_ambiguous_band_may_be_empty_but_not_inverted(monkeypatch):
    monkeypatch.setenv("DREAMER_DUP_THRESHOLD", "0.8")
    monkeypatch.setenv("DREAMER_AMBIGUOUS_LOW", "0.8")
    st = load_settings()
    assert (st.dup_threshold, st.ambiguous_low) == (0.8, 0.8)
    monkeypatch.setenv("DREAMER_AMBIGUOUS_LOW", "0.81")
    with pytest.raises(ConfigError):
        load_settings()


HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    ("variable", "largest"),
    [
        ("DREAMER_RECALL_CANDIDATES", 10_000),
        ("DREAMER_CANDIDATE_MULTIPLIER", 1000),
        ("DREAMER_MAX_SESSIONS_PER_PASS", 10**15),
        ("DREAMER_NEIGHBOURS", 1000),
        ("DREAMER_CONTEXT_RADIUS", 1000),
        ("DREAMER_SOFT_THRESHOLD", 10**15),
        ("DREAMER_FLUSH_WORKERS", 1024),
        ("DREAMER_DATE_SLACK_DAYS", 36600),
    ],
)
def test_a_huge_count_is_refused_and_the_largest_taken(monkeypatch, variable, largest):
    monkeypatch.setenv(variable, HUGE)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value) == f"{variable}: Input should be less than or equal to {largest}"
    monkeypatch.setenv(variable, str(largest))
    assert getattr(load_settings(), variable.removeprefix("DREAMER_").lower()) == largest


def test_every_integer_setting_has_a_largest_value_below_2_to_the_62():
    largest = {name: _largest(field) for name, field in Settings.model_fields.items() if field.annotation is int}
    assert {name for name, value in largest.items() if value is None or value >= 2**62} == set()


def _largest(field):
    return next((m.le for m in field.metadata if getattr(m, "le", None) is not None), None)


def test_several_bad_values_are_listed_up_to_three(monkeypatch):
    for name in ("RECALL_K", "CHUNK_TOKENS", "NEIGHBOURS", "MAX_ATTEMPTS"):
        monkeypatch.setenv(f"DREAMER_{name}", "0")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert str(caught.value).count("DREAMER_") == 3
    assert str(caught.value).endswith(" (and 1 more)")


def test_a_dot_env_that_is_not_utf8_is_named(monkeypatch, tmp_path):
    (tmp_path / ".env").write_bytes(b"DREAMER_RECALL_K=\xff\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_settings()
    where = (tmp_path / ".env").resolve()
    assert str(caught.value) == f"cannot read settings from {where}: not valid UTF-8 (byte offset 17)"


def test_of_several_env_files_the_one_that_is_not_utf8_is_named(tmp_path):
    good, bad = tmp_path / "good.env", tmp_path / "bad.env"
    good.write_text("DREAMER_RECALL_K=7\n", encoding="utf-8")
    bad.write_bytes(b"# caf\xe9\nDREAMER_RECALL_K=8\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(_env_file=(good, tmp_path / "missing.env", bad))
    assert str(caught.value) == f"cannot read settings from {bad.resolve()}: not valid UTF-8 (byte offset 5)"
    assert load_settings(_env_file=good).recall_k == 7


def test_the_defaults_pass_their_own_bounds():
    assert load_settings() == Settings()
