"""The pure policy of memory modes and teams: the provider's breaker, the merge of two sources,
who may close a team round; and a provider found by its entry point."""

from __future__ import annotations

import pytest

from dreamer.core.errors import ConfigError
from dreamer.core.memory_modes import interleave, reads_builtin, reads_external, writes_builtin, writes_external
from dreamer.core.provider_breaker import CLOSED, OPEN, PROBE, BreakerPolicy, BreakerState, admit, failed, succeeded
from dreamer.core.settings import Settings
from dreamer.core.teams import TeamRef, round_refusal, writes
from dreamer.providers.registry import load_provider, provider_names

POLICY = BreakerPolicy(failures=3, cooldown=10.0)


def test_the_breaker_opens_after_the_failures_in_a_row_and_probes_after_the_cooldown():
    s = BreakerState()
    for n in (1, 2):
        s = failed(s, POLICY, now=float(n), reason="boom")
        assert (s.state, s.failures) == (CLOSED, n)
    s = failed(s, POLICY, now=3.0, reason="missed the deadline")
    assert (s.state, s.opened_at, s.reason) == (OPEN, 3.0, "missed the deadline")
    assert admit(s, POLICY, now=12.9) == (False, s)  # still cooling down
    ok, probing = admit(s, POLICY, now=13.0)
    assert ok and probing.state == PROBE
    assert admit(probing, POLICY, now=13.0)[0] is False  # one probe at a time
    assert failed(probing, POLICY, now=14.0, reason="still down").state == OPEN  # a failed probe reopens at once
    assert succeeded(probing) == BreakerState()


def test_a_success_resets_the_count():
    s = failed(failed(BreakerState(), POLICY, 1.0, "x"), POLICY, 2.0, "x")
    assert failed(succeeded(s), POLICY, 3.0, "x").state == CLOSED


def test_each_mode_reads_and_writes_what_it_says():
    table = {
        m: (reads_builtin(m), reads_external(m), writes_builtin(m), writes_external(m))
        for m in ("builtin", "external", "both", "off")
    }
    assert table == {
        "builtin": (True, False, True, False),
        "external": (False, True, False, True),
        "both": (True, True, True, True),
        "off": (False, False, False, False),
    }


def test_interleave_takes_turns_and_leaves_out_what_was_said_already():
    mine = ["Tea in the morning.", "Aisle seats."]
    theirs = ["tea in the MORNING", "Lisbon in May.", "Cats."]
    assert interleave([mine, theirs], str, 10) == ["Tea in the morning.", "Aisle seats.", "Lisbon in May.", "Cats."]
    assert interleave([mine, theirs], str, 2) == ["Tea in the morning.", "Aisle seats."]
    assert interleave([[], theirs], str, 5) == theirs


def test_only_the_leaders_token_bound_to_the_team_closes_a_round():
    red = TeamRef("alice", "red", "lead", temporary=False)
    assert round_refusal(red, "alice", "lead", "red") is None
    assert (
        round_refusal(red, "alice", "coder", "red")
        == "only the leader (lead) writes the memory of team 'red'; members read it"
    )
    assert round_refusal(red, "alice", "lead", "blue") == "this token is not bound to team 'red'"
    assert round_refusal(red, "bob", "lead", "red") == "this token is not bound to team 'red'"
    assert writes(red) and not writes(TeamRef("alice", "tmp", "lead", temporary=True))


class Fake:
    name = "fake"

    def __init__(self, settings):
        self.settings = settings

    def prefetch(self, query, scope, k):
        return []

    def sync(self, turns):
        return None

    def close(self):
        return None


def test_a_provider_is_found_by_its_entry_point(tmp_path, monkeypatch):
    """A package's metadata registers `fake` under `dreamer.providers`; the registry finds and builds it."""
    dist = tmp_path / "fake_provider-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-provider\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[dreamer.providers]\nfake = test_provider_policy:Fake\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = Settings(_env_file=None, data_dir=tmp_path / "data")
    assert "fake" in provider_names() and "mem0" in provider_names()
    built = load_provider("fake", settings)
    assert isinstance(built, Fake) and built.settings is settings
    with pytest.raises(ConfigError, match="no memory provider 'nope'"):
        load_provider("nope", settings)


def test_the_mem0_configuration_uses_the_endpoints_and_merges_the_setting_at_every_depth(tmp_path):
    from dreamer.providers.mem0 import mem0_config, scope_key

    settings = Settings(
        _env_file=None,
        data_dir=tmp_path,
        llm_base_url="http://127.0.0.1:9/v1",
        embed_dim=64,
        mem0_config='{"vector_store": {"config": {"collection_name": "team-a"}}, "history_db_path": "h.db"}',
    )
    config = mem0_config(settings)
    assert config["embedder"]["config"]["openai_base_url"] == "http://127.0.0.1:9/v1"
    assert config["vector_store"] == {
        "provider": "qdrant",
        "config": {
            "path": str(tmp_path / "mem0" / "qdrant"),
            "collection_name": "team-a",
            "embedding_model_dims": 64,
            "on_disk": True,
        },
    }
    assert config["history_db_path"] == "h.db"
    with pytest.raises(ConfigError, match="mem0_config must be a JSON object"):
        mem0_config(settings.model_copy(update={"mem0_config": "[1]"}))
    from dreamer.core.scope import Scope

    assert scope_key(Scope("alice", team="red")) != scope_key(Scope("alice", agent_id="red"))
