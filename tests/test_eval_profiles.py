"""`dreamer eval profiles`: reading the file, the matching rule, the oracle judge, and the run's
figures on a tiny profile file through the real pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clikit import run

from dreamer.core.errors import IngestError
from dreamer.core.settings import Settings
from dreamer.engine.consolidation.judge import JudgePair, Statement
from dreamer.eval.profiles.format import CATEGORIES, Matcher, load_profiles
from dreamer.eval.profiles.oracle import OracleJudge
from dreamer.eval.profiles.run import ProfilesOptions, run_profiles

DATA = Path(__file__).parent / "data"
TINY = DATA / "profiles-tiny.json"


def test_the_tiny_and_dev_files_are_read_whole():
    iris, otto = load_profiles(TINY)
    assert [s.number for s in iris.sessions] == [1, 2, 3]
    assert iris.updates() == [(2, "The user lives in Lyon.", "The user lives in Grenoble.")]
    assert [t.test_id for t in iris.tests] == ["iris-city", "iris-job"]
    assert otto.replaced("The user switched from Notepad++ to Kate.") == {"the user writes in notepad"}
    dev = load_profiles(DATA / "profiles-dev.json")
    assert (len(dev), sum(len(p.updates()) for p in dev)) == (13, 21)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "the file is empty"),
        ("[", "invalid JSON: Expecting value at line 1 column 2"),
        ("[]", "no profile in the file"),
        ('[{"sessions": []}]', "profile 1: user_id must be a non-empty text"),
        (
            '[{"user_id": "a", "sessions": [{"session_id": 1, "turns": [{"role": "bot", "content": "x"}]}]}]',
            "profile 1: session 1: turn 1 needs a role (user, assistant, system, tool) and a text content",
        ),
        (
            '[{"user_id": "a", "sessions": [{"session_id": 1}], "memory_tests": '
            '[{"test_id": "t", "session": 2, "query": "q", "category": "simple_recall"}]}]',
            "profile 1: memory test t: session must name one of the profile's session_ids",
        ),
        (
            '[{"user_id": "a", "sessions": [{"session_id": 1}], "memory_tests": '
            '[{"test_id": "t", "session": 1, "query": "q", "category": "trivia"}]}]',
            "profile 1: memory test t: category must be one of simple_recall, contradiction_update, "
            "implicit_preference, temporal_relevance, consolidation, noise_resistance, cross_session",
        ),
        (
            '[{"user_id": "a", "sessions": []}, {"user_id": "a", "sessions": []}]',
            "profile 2: user_id 'a' appears twice",
        ),
    ],
)
def test_a_file_the_harness_cannot_read_is_refused_naming_what_is_wrong(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(IngestError) as info:
        load_profiles(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_memory_stands_for_the_fact_whose_rare_words_it_covers():
    m = Matcher(["The user lives in Lisbon.", "The user lives in Porto.", "The user works remotely as a UX designer."])
    assert m.match("the user lives in porto") == "the user lives in porto"  # normalised equality
    assert m.match("The user just moved to Porto.") == "the user lives in porto"
    assert m.match("The user relocated to Lisbon last spring.") == "the user lives in lisbon"
    assert m.match("The user is a remote UX designer.") == "the user works remotely as a ux designer"
    assert m.match("The user lives somewhere sunny.") is None  # "lives" alone is not a city
    assert m.match("The user likes jazz.") is None
    assert m.match("The user no longer lives in Porto.") is None  # a negation stands for no plain fact


def _pair(old: str, new: str) -> JudgePair:
    return JudgePair(Statement("m1", old, "profile"), Statement("pending:0", new, "profile"))


def test_the_oracle_judges_from_the_annotations_of_the_profile_being_dreamed():
    iris, otto = load_profiles(TINY)
    oracle = OracleJudge(iris)
    pairs = [
        _pair("The user lives in Lyon.", "The user lives in Grenoble."),
        _pair("The user lives in Grenoble.", "The user has just moved to Grenoble."),
        _pair("The user lives in Grenoble.", "The user lives in Lyon."),  # not annotated this way round
        _pair("The user lives in Lyon.", "The user works at Boulangerie Martin as a baker."),
        _pair("The user lives in Lyon.", "The user likes cheese."),
    ]
    assert oracle.judge(pairs).verdicts == ["update", "same", "new", "new", "new"]
    oracle.profile = otto
    assert oracle.judge(
        [_pair("The user writes in Notepad++.", "The user switched from Notepad++ to Kate.")]
    ).verdicts == ["update"]


def test_the_cli_refuses_a_bad_file_or_an_endpoint_it_lacks_in_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"user_id": "a", "sessions": "none"}]', encoding="utf-8")
    proc = run(tmp_path, "eval", "profiles", str(bad), "--extractor", "replay", "--judge", "oracle")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", f"error: {bad}: profile 1: sessions must be a list\n")
    proc = run(tmp_path, "eval", "profiles", str(TINY), "--judge", "llm")
    assert (proc.returncode, proc.stderr) == (1, "error: --judge llm needs an endpoint: set DREAMER_LLM_BASE_URL\n")
    proc = run(tmp_path, "eval", "profiles", str(TINY), "--extractor", "gpt")
    assert proc.returncode == 2 and "--extractor must be one of replay, rules, llm" in proc.stderr


def _tiny(tmp_path, extractor: str, judge: str) -> dict:
    settings = Settings(_env_file=None, data_dir=tmp_path / "unused", embedder="none")
    return run_profiles(settings, ProfilesOptions(TINY, extractor, judge))  # type: ignore[arg-type]


HITS = {c: None for c in CATEGORIES} | {"overall": 1.0, "simple_recall": 1.0, "contradiction_update": 1.0}
# every test asked after an update is read for stale answers: all three here
TESTS = {"n": 3, "hit_at_5": HITS, "hit_at_5_any": HITS, "stale_current": 0.0, "stale_n": 3, "must_not_n": 0}
NO_FALSE = {"false_supersessions": 0, "false_supersession_rate": 0.0, "false_supersession_pairs": []}
NONE_HELD = {"may_have_changed": 0, "may_have_changed_queued": 0}
NOTEPAD = {
    "user_id": "otto",
    "session": 2,
    "old": "The user writes in Notepad++.",
    "new": "The user switched from Notepad++ to Kate.",
    "new_stored": ["The user switched from Notepad++ to Kate."],
    "topics": [None, None],  # editors no slot rule knows: only similarity could route them
    "similarity": 0.3333,
}


def test_replay_with_the_oracle_on_the_tiny_file(tmp_path):
    r = _tiny(tmp_path, "replay", "oracle")
    assert (r["extractor"], r["profiles"], r["sessions"], r["memories"]) == ("replay", 2, 5, 5)
    # Lyon -> Grenoble by its slot; Notepad++ -> Kate as a switch, whose band starts at 0.3
    assert (
        r["updates"] == {"annotated": 2, "routed": 1.0, "resolved": 1.0} | NO_FALSE | {"supersessions": 2} | NONE_HELD
    )
    assert r["judge"] == {"name": "oracle", "pairs": 2, "pairs_per_memory": 0.4}
    assert r["tests"] == TESTS
    assert r["unrouted"] == []
    assert (r["noise"], r["heard"], r["tokens"]) == (
        {"stored": None, "share": None},
        {"facts": None, "share": None},
        {"llm_calls": 0, "prompt": 0, "completion": 0},
    )


def test_rules_without_a_model_on_the_tiny_file(tmp_path):
    r = _tiny(tmp_path, "rules", "none")
    assert (r["extractor"], r["memories"], r["judge"]) == (
        "rules",
        4,
        {"name": "none", "pairs": 0, "pairs_per_memory": 0.0},
    )
    # without a judge the newer city is only proposed: both current, the pair in the review queue
    no_false = NO_FALSE | {"false_supersession_rate": None}
    held = {"may_have_changed": 1, "may_have_changed_queued": 1}
    assert r["updates"] == {"annotated": 2, "routed": 0.5, "resolved": 0.0} | no_false | {"supersessions": 0} | held
    assert r["tests"] == TESTS | {"stale_current": 0.6667}  # Lyon, still current beside Grenoble
    assert r["noise"] == {"stored": 0, "share": 0.0}  # the supposed bakery is not stored
    assert r["heard"] == {"facts": 5, "share": 0.8}  # all but the switch to Kate
    assert r["unrouted"] == [NOTEPAD | {"old_stored": []}]  # "at the moment" is no rule's phrasing


def _run(tmp_path, name: str, extractor: str, judge: str) -> dict:
    settings = Settings(_env_file=None, data_dir=tmp_path / "unused")
    return run_profiles(settings, ProfilesOptions(DATA / name, extractor, judge))  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["profiles-dev.json", "profiles-dev2.json", "profiles-dev3.json"])
def test_without_a_judge_no_true_fact_is_retired_on_the_dev_sets(tmp_path, name):
    r = _run(tmp_path, name, "rules", "none")
    assert (r["updates"]["false_supersessions"], r["updates"]["false_supersession_pairs"]) == (0, [])


def test_the_oracle_routes_and_resolves_every_update_of_the_third_dev_set(tmp_path):
    """Its facts name only what their sessions said ("a 2012 Civic", not the maker the grounding
    contract would refuse as never said), so every update is stored, routed and resolved."""
    r = _run(tmp_path, "profiles-dev3.json", "replay", "oracle")
    assert (r["updates"]["annotated"], r["updates"]["routed"], r["updates"]["resolved"]) == (25, 1.0, 1.0)
    assert (r["tests"]["stale_current"], r["tests"]["stale_n"], r["tests"]["must_not_n"]) == (0.0, 51, 33)
    assert r["judge"]["pairs_per_memory"] <= 1.0


def test_without_a_judge_no_trap_retires_a_fact_and_every_unjudged_change_is_queued(tmp_path):
    """Other people's changes, hypotheticals, plans called off, moved events, look-alike words and
    true changes, each profile dated: nothing is retired without a judge, and each newer value of
    a slot waits in the review queue beside the value it may replace."""
    r = _run(tmp_path, "profiles-traps.json", "replay", "none")
    up = r["updates"]
    assert (up["supersessions"], up["false_supersessions"]) == (0, 0)
    assert (up["may_have_changed"], up["may_have_changed_queued"]) == (13, 13)


def test_the_oracle_resolves_every_true_change_of_the_trap_set_and_serves_nothing_stale(tmp_path):
    r = _run(tmp_path, "profiles-traps.json", "replay", "oracle")
    up, tests = r["updates"], r["tests"]
    assert (up["annotated"], up["routed"], up["resolved"], up["false_supersessions"]) == (13, 1.0, 1.0, 0)
    assert (tests["n"], tests["hit_at_5"]["overall"], tests["stale_current"], tests["stale_n"]) == (34, 1.0, 0.0, 14)


def test_a_profile_time_that_is_no_date_is_refused_with_its_place(tmp_path):
    bad = [{"user_id": "u", "sessions": [{"session_id": 1, "time": "last Tuesday", "turns": []}]}]
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    with pytest.raises(IngestError, match="session 1: time must be an ISO 8601 date or time"):
        load_profiles(path)
