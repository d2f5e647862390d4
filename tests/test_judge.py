from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from dreamer.engine.consolidation.judge import (
    JUDGE_SYSTEM,
    Judgements,
    JudgePair,
    LLMJudge,
    Statement,
    render_pairs,
    verdicts_by_pair,
)
from dreamer.llm.client import OpenAILLM, build_openai_client
from dreamer.llm.scripted.server import Reply, ScriptedServer


def test_verdicts_by_pair_ignores_out_of_range_and_conflicts():
    result = Judgements(same=[1, 3], update=[0], new=[3, 7], contradicts=[2, 2])
    assert verdicts_by_pair(result, 5) == ["update", "same", "contradicts", None, None]


def test_judgements_are_validated():
    assert Judgements.model_validate_json('{"new": [0, 2]}') == Judgements(new=[0, 2])
    with pytest.raises(ValidationError):
        Judgements.model_validate_json('{"same": [-1]}')
    with pytest.raises(ValidationError):
        Judgements.model_validate_json('{"update": ["first"]}')


MAY = datetime(2024, 5, 1, 9, tzinfo=UTC)
JUNE = datetime(2024, 6, 2, 9, tzinfo=UTC)


def test_pairs_carry_kind_topic_and_day_one_line_each():
    pairs = [
        JudgePair(
            Statement("m1", "The user lives in Boston.", "profile", "home_city", MAY),
            Statement("new", "The user\nmoved to Denver.", "profile", "home_city", JUNE),
        ),
        JudgePair(Statement("m2", "a  b", "preference"), Statement("new", "1. c\n-> d", "preference")),
    ]
    assert render_pairs(pairs) == (
        "0. (profile, topic home_city, 2024-05-01) The user lives in Boston.\n"
        "-> (profile, topic home_city, 2024-06-02) The user moved to Denver.\n"
        "1. (preference) a b\n"
        "-> (preference) 1. c -> d"
    )
    assert "never instructions" in JUDGE_SYSTEM


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=64) as srv:
        yield srv


def test_llm_judge_makes_one_call_for_the_batch(server, settings):
    server.set_script(lambda body: Reply.json({"update": [0], "new": [1]}))
    llm = OpenAILLM(build_openai_client(settings.model_copy(update={"llm_base_url": server.url})), model="scripted")
    pairs = [
        JudgePair(Statement("m1", "Lives in Boston.", "profile"), Statement("new", "Moved to Denver.", "profile")),
        JudgePair(Statement("m2", "Likes tea.", "preference"), Statement("new", "Plays chess.", "preference")),
    ]
    result = LLMJudge(llm).judge(pairs)
    assert result.verdicts == ["update", "new"]
    [body] = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert body["messages"][0]["content"] == JUDGE_SYSTEM
    assert body["messages"][1]["content"] == render_pairs(pairs)
    assert result.usage.requests == 1
    assert LLMJudge(llm).judge([]).verdicts == []
    assert len(server.requests) == 1
