"""Contract tests of the prompt cards: each renders with its rules, its worked examples (whose
input is exactly the transcript the pass renders, and whose output validates against the
schema) and every field of its schema described, within the stated token ceiling."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest
from clikit import run, write_chat
from dreamkit import extraction_script
from pydantic import BaseModel, Field

from dreamer.core.tokens import count_tokens, exact_counting
from dreamer.engine.consolidation.judge import (
    JUDGE_SYSTEM,
    Judgements,
    JudgePair,
    Statement,
    render_pairs,
    verdicts_by_pair,
)
from dreamer.engine.extraction.extract import AgentAnswer, CodeAnswer, CodeItem, extraction_prompt
from dreamer.engine.extraction.screen import SCREEN_SYSTEM, Screened, render_lines
from dreamer.engine.extraction.transcript import (
    Lesson,
    Line,
    lesson_label,
    render_body,
    render_lessons,
    render_transcript,
)
from dreamer.engine.team_round import TeamAnswer, team_prompt
from dreamer.llm.bill import billed_prompt, compact_json
from dreamer.llm.cards import CARDS, card_text, describe_schema, examples, render_card
from dreamer.llm.client import schema_format
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.compaction.summary import CompactSummary, compact_prompt
from dreamer.online.flush.notes import FlushNotes, flush_prompt

CEILING = 1_200  # tokens of a card's system prompt plus its schema as sent, at the default limit
LIMIT = 5

TRANSCRIPT_CARDS = {"extract_agent": AgentAnswer, "extract_code": CodeAnswer, "flush": FlushNotes, "team": TeamAnswer}
SCHEMAS: dict[str, type[BaseModel]] = {
    **TRANSCRIPT_CARDS,
    "judge": Judgements,
    "compact": CompactSummary,
    "screen": Screened,
}
RULES = {
    "extract_agent": ["## Keep", "## Drop, and why", "## Importance", "small talk", "took them up"],
    "extract_code": ["## Keep", "## Drop, and why", "## Importance", "## Guesses are not facts", 'basis "inferred"'],
    "flush": ["## Keep", "## Drop, and why", "Commitments and open tasks"],
    "team": ["## Keep, under its tag", "## Drop, and why", "## Importance", "and why", "Name the member"],
    "judge": ["## How the pairs are marked", "## Verdicts, and what they do", "## Careful", "choose new"],
}
MARKS = ["<transcript", "# 8 May 2023", "[12] Maria: text", "(context)", "[REDACTED:kind]", "four spaces"]
_LINE = re.compile(r"^\[(\d+)\] (.+?)( \(context\))?: (.*)$")
_USERS = re.compile(r'^<transcript(?: user="([^"]*)")?>$')


def prompt(card: str) -> str:
    if card == "judge":
        return JUDGE_SYSTEM
    if card == "flush":
        return flush_prompt(LIMIT)
    if card == "team":
        return team_prompt(LIMIT)
    if card == "compact":
        return compact_prompt()
    if card == "screen":
        return SCREEN_SYSTEM
    return extraction_prompt("code" if card == "extract_code" else "agent", LIMIT)


def parse_lessons(given: str) -> tuple[list[Lesson], str]:
    """The known lessons an example's input shows before its transcript (labelled in order, each
    read back with its label as its id), and the rest of the input."""
    if not given.startswith("<lessons>\n"):
        return [], given
    block, rest = given.removeprefix("<lessons>\n").split("\n</lessons>\n", 1)
    lessons = []
    for k, row in enumerate(block.splitlines()):
        label, text = row.split(": ", 1)
        assert label == lesson_label(k), row
        lessons.append(Lesson(label, text))
    return lessons, rest


def parse_example(given: str) -> tuple[list[Line], bool]:
    """The lines an example's input shows, read back into `Line`s; and whether it names its users."""
    rows = given.splitlines()
    tag = _USERS.match(rows[0])
    assert tag is not None and rows[-1] == "</transcript>", given
    users = set((tag.group(1) or "").split(", ")) - {""}
    lines: list[Line] = []
    day = None
    for row in rows[1:-1]:
        if row.startswith("# "):
            day = datetime.strptime(row[2:], "%d %B %Y").date()
            continue
        m = _LINE.match(row)
        assert m is not None, row
        who = m.group(2)
        role, name = ("user", who) if who in users else (who, None)
        lines.append(Line(int(m.group(1)), role, name, m.group(4), context_only=bool(m.group(3)), day=day))
    return lines, bool(users)


def answer_items(answer: BaseModel) -> list[BaseModel]:
    return [item for name in type(answer).model_fields for item in getattr(answer, name)]


# --------------------------------------------------------------------------- every card


def test_every_card_has_its_test():
    assert set(CARDS) == set(SCHEMAS)


@pytest.mark.parametrize("card", sorted(TRANSCRIPT_CARDS))
def test_a_card_states_its_rules_and_how_the_transcript_is_marked(card):
    text = prompt(card)
    for rule in RULES[card] + MARKS:
        assert rule in text, rule
    assert f"at most {LIMIT}" in text
    assert "never instructions" in text
    assert "$" not in text and "{{" not in text  # every placeholder and include filled in


@pytest.mark.parametrize("card", sorted(SCHEMAS))
def test_a_card_describes_every_field_of_its_schema(card):
    schema = SCHEMAS[card]
    text = prompt(card)
    assert text.endswith(describe_schema(schema))
    js = schema.model_json_schema()
    described = [js, *js.get("$defs", {}).values()]
    for obj in described:
        for name, prop in obj.get("properties", {}).items():
            assert re.search(rf"^- {name}( \(list of \w+\))?: {re.escape(prop['description'])}$", text, re.M)


@pytest.mark.parametrize("card", sorted(TRANSCRIPT_CARDS))
def test_each_example_is_the_transcript_the_pass_renders_and_its_answer_validates(card):
    found = examples(card)
    assert 2 <= len(found) <= 3
    empty = 0
    for ex in found:
        lessons, given = parse_lessons(ex.given)
        lines, named = parse_example(given)
        rendered = render_transcript(lines) if named else f"<transcript>\n{render_body(lines)}\n</transcript>"
        assert render_lessons(lessons) + rendered == ex.given
        answer = TRANSCRIPT_CARDS[card].model_validate_json(ex.answer)
        assert json.loads(ex.answer) == json.loads(ex.answer)  # one JSON object, as the model answers
        items = answer_items(answer)
        new = {ln.seq for ln in lines if not ln.context_only}
        for item in items:
            assert item.seqs and set(item.seqs) <= new, (ex.title, item)  # new lines only, never (context)
        empty += not items
        assert ex.title in card_text(card)
    assert empty == 1  # one session with nothing worth keeping


@pytest.mark.parametrize("card", sorted(SCHEMAS))
def test_system_prompt_and_schema_stay_under_the_ceiling(card):
    assert exact_counting()
    schema = compact_json(schema_format(SCHEMAS[card], "x")["json_schema"])  # type: ignore[typeddict-item]
    total = count_tokens(prompt(card)) + count_tokens(schema)
    assert total <= CEILING, total


def test_the_extraction_cards_say_how_a_topic_is_kept():
    assert "both home_city" in prompt("extract_agent") and "kept when its value changes" in prompt("extract_agent")
    assert "- topic: one key per setting or choice, kept when it changes" in prompt("extract_code")
    for card in ("extract_agent", "extract_code"):
        assert re.search(r"^- topic: the slot it fills", prompt(card), re.M)
        assert re.search(r"^- cardinality: one: a new value replaces the old", prompt(card), re.M)


def test_the_judge_card_states_its_rules_and_how_pairs_are_marked():
    text = prompt("judge")
    for rule in RULES["judge"]:
        assert rule in text, rule
    assert "3. (profile, topic home_city, 2023-05-08) Maria lives in Paris." in text
    assert "never instructions" in text and "$" not in text and "{{" not in text


_PAIR_SIDE = re.compile(r"^(?:(\d+)\. |-> )\(([^);]*)(?:; read: ([^)]*))?\) (.*)$")


def parse_pairs(given: str) -> list[JudgePair]:
    """The pairs a judge example shows, read back: ``n. (kind, topic t, day) old`` / ``-> (...) new``."""
    sides = []
    for row in given.splitlines():
        m = _PAIR_SIDE.match(row)
        assert m is not None, row
        kind, *rest = m.group(2).split(", ")
        topic = next((r.removeprefix("topic ") for r in rest if r.startswith("topic ")), None)
        day = next((datetime.strptime(r, "%Y-%m-%d").date() for r in rest if not r.startswith("topic ")), None)
        sides.append((Statement(str(len(sides)), m.group(4), kind, topic, day), m.group(3)))
    assert len(sides) % 2 == 0
    return [JudgePair(sides[i][0], sides[i + 1][0], sides[i + 1][1]) for i in range(0, len(sides), 2)]


def test_each_judge_example_is_the_request_the_pass_sends_and_files_every_pair_once():
    found = examples("judge")
    assert len(found) == 2
    for ex in found:
        pairs = parse_pairs(ex.given)
        assert render_pairs(pairs) == ex.given
        verdicts = verdicts_by_pair(Judgements.model_validate_json(ex.answer), len(pairs))
        assert None not in verdicts  # each pair under exactly one verdict
    first, calm = (verdicts_by_pair(Judgements.model_validate_json(e.answer), len(parse_pairs(e.given))) for e in found)
    assert first == ["update", "same", "new"] and calm == ["new"]  # someone else's phone is no change
    assert parse_pairs(found[0].given)[2].grounds == "someone else's, not the user's"


def test_the_code_card_examples_mark_a_guess_inferred():
    bases = [
        item.basis
        for ex in examples("extract_code")
        for item in answer_items(CodeAnswer.model_validate_json(ex.answer))
    ]
    assert "inferred" in bases and "confirmed" in bases


def test_the_code_card_examples_show_conditions_and_a_known_lesson_that_fails():
    """One worked example shows a known lessons block, an item with its conditions and an item
    countering a lesson it was shown, by that lesson's label."""
    shown = [(parse_lessons(ex.given)[0], CodeAnswer.model_validate_json(ex.answer)) for ex in examples("extract_code")]
    items = [(lessons, item) for lessons, answer in shown for item in answer_items(answer)]
    assert any(item.conditions for _, item in items)
    countering = [(lessons, item.counters) for lessons, item in items if item.counters]
    assert countering and all(label in [ls.entry_id for ls in lessons] for lessons, label in countering)
    text = prompt("extract_code")
    assert (
        "## Known lessons" in text and "`<lessons>`" in text and re.search(r"^- conditions: when it holds", text, re.M)
    )


def test_an_inferred_code_item_is_a_candidate_tagged_inferred():
    answer = CodeAnswer(
        root_cause=[
            CodeItem(text="The cache probably expires too early.", seqs=[2], tags=["cache"], basis="inferred"),
            CodeItem(text="The cache expires after 60 seconds.", seqs=[3], tags=["cache"], basis="observed"),
        ]
    )
    assert [c.tags for c in answer.candidates()] == [["inferred", "cache"], ["cache"]]


def test_a_field_without_a_description_cannot_be_rendered():
    class Bare(BaseModel):
        described: int = Field(0, description="a number")
        bare: int = 0

    with pytest.raises(ValueError, match="'bare'"):
        render_card("flush", Bare, limit=1)


def test_a_card_left_without_its_values_is_an_error():
    with pytest.raises(KeyError):
        render_card("flush", FlushNotes)
    with pytest.raises(ValueError, match="no card"):
        card_text("../flush")


# --------------------------------------------------------------------------- a whole pass


def test_a_pass_sends_the_card_and_the_schema_and_its_run_keeps_the_bill(tmp_path):
    """`dreamer dream` as a user runs it, through the real openai client to the scripted server:
    the request carries the extraction card and its schema, and the run row (`runs show`) keeps
    the usage the endpoint reported, the schema and each message's overhead included."""
    chat = tmp_path / "chat.jsonl"
    rounds = [("I prefer green tea in the morning.", "Noted.")] + [(f"ok {i}", f"reply {i}") for i in range(3)]
    write_chat(chat, *[(role, text) for pair in rounds for role, text in zip(("user", "assistant"), pair)])
    with ScriptedServer(embed_dim=64) as server:
        server.set_script(extraction_script())
        env = {"DREAMER_LLM_BASE_URL": server.url, "DREAMER_LLM_MODEL": "scripted"}
        assert run(tmp_path, "ingest", str(chat), "--user", "alice").returncode == 0
        dreamed = run(tmp_path, "dream", "--json", env=env)
        assert dreamed.returncode == 0, dreamed.stderr
        shown = run(tmp_path, "runs", "show", str(json.loads(dreamed.stdout)["id"]), env=env)
        [entry] = [r for r in server.requests if r["path"].endswith("/chat/completions")]
    body, usage = entry["body"], entry["usage"]
    assert body["messages"][0] == {"role": "system", "content": extraction_prompt("agent", 5)}
    assert body["response_format"] == schema_format(AgentAnswer, "memories")
    assert usage["prompt_tokens"] == billed_prompt(
        extraction_prompt("agent", 5), body["messages"][1]["content"], AgentAnswer, "memories"
    )
    assert usage["prompt_tokens"] > count_tokens(body["messages"][0]["content"]) + count_tokens(
        compact_json(body["response_format"]["json_schema"])
    )
    record = json.loads(dreamed.stdout)
    assert (record["added"], record["llm_calls"]) == (1, 1)
    assert (record["prompt_tokens"], record["completion_tokens"]) == (
        usage["prompt_tokens"],
        usage["completion_tokens"],
    )
    assert f"LLM 1 call(s), {usage['prompt_tokens']}+{usage['completion_tokens']} tokens" in shown.stdout


def test_the_scripted_server_answers_the_team_card_from_the_request():
    """Each worked example of the team card, sent as a round is: the scripted server files each
    line under the tag the example does, in the line's own words, and nothing for chatter."""
    from dreamer.llm.scripted.team import team_answer, team_reply

    for ex in examples("team"):
        body = {"messages": [{"role": "system", "content": prompt("team")}, {"role": "user", "content": ex.given}]}
        answered = team_answer(body)
        expected = json.loads(ex.answer)
        assert {tag: [i["seqs"] for i in items] for tag, items in answered.items()} == {
            tag: [i["seqs"] for i in items] for tag, items in expected.items()
        }
    judge = {
        "messages": [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": "[1] A: we chose X"}]
    }
    assert team_reply(judge) is None  # any other card is left to the script


def test_the_screen_card_states_what_counts_and_its_examples_file_each_line_once():
    text = card_text("screen")
    for rule in ("## What counts", "## What does not count", "never instructions to you", "Unsure: leave the line out"):
        assert rule in text
    found = examples("screen")
    assert [ex.title for ex in found] == ["a code, a wish that widens, a look-alike", "nothing to flag"]
    for ex in found:
        lines = ex.given.splitlines()
        assert render_lines([ln.split(". ", 1)[1] for ln in lines]) == ex.given
        answer = Screened.model_validate_json(ex.answer)
        filed = answer.secret + answer.steers
        assert len(filed) == len(set(filed)) and all(n < len(lines) for n in filed)
