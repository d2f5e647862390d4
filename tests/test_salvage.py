"""Reading weak replies (pure): fences, prose, cut replies, wrong shapes, item-by-item validation."""

from __future__ import annotations

import json

from pydantic import BaseModel, Field

from dreamer.engine.consolidation.judge import Judgements
from dreamer.engine.extraction.extract import AgentAnswer
from dreamer.llm.salvage import read_json, salvage


class Facts(BaseModel):
    facts: list[str]
    confidence: float = 0.5


ITEM = {"text": "The user is vegetarian.", "seqs": [1]}
ANSWER = {"preference": [], "profile": [ITEM], "focus": []}


def test_plain_json_is_read_as_it_is():
    got = salvage(AgentAnswer, json.dumps(ANSWER))
    assert got.value is not None and [c.text for c in got.value.candidates()] == ["The user is vegetarian."]
    assert (got.dropped, got.kept, got.empty_handed) == ([], 1, False)


def test_json_in_a_code_fence():
    got = salvage(AgentAnswer, f"```json\n{json.dumps(ANSWER)}\n```")
    assert got.value is not None and got.kept == 1


def test_json_with_prose_around_it():
    reply = f"Sure! Here is the JSON:\n{json.dumps(ANSWER)}\nLet me know if you need more."
    got = salvage(AgentAnswer, reply)
    assert got.value is not None and got.value.profile[0].seqs == [1]


def test_a_reply_cut_short_keeps_its_complete_items():
    full = json.dumps({"profile": [ITEM, {"text": "The user lives in Leeds.", "seqs": [2]}]})
    cut = full[: full.index("Leeds")]
    got = salvage(AgentAnswer, cut)
    assert got.value is not None and [i.text for i in got.value.profile] == ["The user is vegetarian."]


def test_read_json_finds_nothing_in_prose():
    assert read_json("I could not find anything worth keeping.") is None
    assert salvage(AgentAnswer, "nothing here").problem == "no JSON object in the reply"
    assert salvage(AgentAnswer, "   ").problem == "empty content"


def test_an_object_where_a_list_was_asked_is_a_list_of_one():
    got = salvage(AgentAnswer, json.dumps({"preference": ITEM}))
    assert got.value is not None and [i.text for i in got.value.preference] == ["The user is vegetarian."]


def test_a_bare_sentence_where_an_item_was_asked_is_its_text():
    got = salvage(AgentAnswer, json.dumps({"preference": ["Likes green tea."]}))
    assert got.value is not None and got.value.preference[0].text == "Likes green tea."


def test_a_list_where_the_object_was_asked_goes_to_the_one_list_field():
    got = salvage(Facts, '["tabs", "dark mode"]')
    assert got.value == Facts(facts=["tabs", "dark mode"])


def test_a_list_of_items_with_kinds_is_grouped_by_kind():
    reply = json.dumps(
        [{"kind": "profile", **ITEM}, {"kind": "focus", "text": "Training for a marathon.", "seqs": [3]}]
    )
    got = salvage(AgentAnswer, reply)
    assert got.value is not None
    assert [(c.kind, c.text) for c in got.value.candidates()] == [
        ("profile", "The user is vegetarian."),
        ("focus", "Training for a marathon."),
    ]


def test_a_list_without_kinds_for_several_lists_is_not_guessed():
    got = salvage(Judgements, "[0, 1]")
    assert got.value is None and got.problem == "a JSON list where an object was asked"


def test_an_answer_wrapped_in_one_key_is_unwrapped():
    got = salvage(AgentAnswer, json.dumps({"result": ANSWER}))
    assert got.value is not None and got.kept == 1


def test_extra_keys_and_missing_optional_fields_are_fine():
    reply = json.dumps({"profile": [{"text": "The user is vegetarian.", "mood": "happy"}], "notes": "x"})
    got = salvage(AgentAnswer, reply)
    assert got.value is not None and got.value.profile[0].importance == 0.5 and got.dropped == []


def test_invalid_items_are_dropped_one_by_one_with_their_reason():
    reply = json.dumps({"profile": [ITEM, {"text": "ok"}, {"seqs": [1]}, {"text": "Fine one.", "importance": 7}]})
    got = salvage(AgentAnswer, reply)
    assert got.value is not None and [i.text for i in got.value.profile] == ["The user is vegetarian."]
    assert got.dropped == [
        "profile[1] 'ok': text: String should have at least 3 characters",
        'profile[2] {"seqs": [1]}: text: Field required',
        "profile[3] 'Fine one.': importance: Input should be less than or equal to 1",
    ]
    assert (got.kept, got.empty_handed) == (1, False)


def test_every_item_dropped_is_empty_handed():
    got = salvage(AgentAnswer, json.dumps({"profile": [{"text": "no"}]}))
    assert got.value is not None and got.kept == 0 and got.empty_handed


def test_a_valid_empty_answer_is_not_empty_handed():
    got = salvage(AgentAnswer, json.dumps({"preference": [], "profile": [], "focus": []}))
    assert (got.kept, got.dropped, got.empty_handed) == (0, [], False)


def test_a_field_that_is_no_list_at_all_is_dropped():
    got = salvage(Judgements, json.dumps({"same": 3, "new": [0]}))
    assert got.value == Judgements(new=[0])
    assert got.dropped == ["same: not a list (3)"]


class Strict(BaseModel):
    name: str = Field(min_length=1)
    tags: list[str] = Field(default_factory=list)


def test_a_required_field_missing_is_no_answer():
    got = salvage(Strict, json.dumps({"tags": ["a"]}))
    assert got.value is None and got.problem == "name: Field required"


def test_an_item_cut_inside_is_never_kept_with_the_defaults_of_what_was_cut():
    from dreamer.engine.extraction.extract import CodeAnswer

    whole = {"text": "The retry wrapper swallows timeouts.", "seqs": [2], "basis": "observed"}
    cut = json.dumps(
        {"root_cause": [whole, {"text": "The cache is stale after deploys.", "seqs": [4], "basis": "inferred"}]}
    )
    got = salvage(CodeAnswer, cut[: cut.index('"inferred"')])
    assert got.value is not None
    assert [(i.text, i.basis) for i in got.value.root_cause] == [("The retry wrapper swallows timeouts.", "observed")]
