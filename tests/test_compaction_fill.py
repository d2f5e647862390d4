"""Filling the budget newest first, pure: the newest turns kept, the older span offloaded whole
(and summarised when a summary is given) behind one marker that gives its messages back, the
room left given back newest first, `over` only when the pinned part does not fit; and the one
token counter compaction reports."""

from __future__ import annotations

import itertools
import json

from dreamer.core.compaction.decide import FILL, decide
from dreamer.core.compaction.fill import fill, layout_of, named, summary_span, top_up
from dreamer.core.compaction.plan import SUMMARY_HEAD, CompactionPath, clearing_draft
from dreamer.core.compaction.policy import Policy, marker, total_tokens
from dreamer.core.tokens import ESTIMATE, counter_named

TALK = "we compared the two options and wrote down the numbers for later "


def ids() -> object:
    n = itertools.count(1)
    return lambda: f"ofl_{next(n):04d}"


def talk(turns: int = 10) -> list[dict]:
    msgs = [{"role": "system", "content": "You are careful."}]
    for k in range(turns):
        msgs.append({"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k}: " + TALK * 3})
    return [*msgs, {"role": "assistant", "content": "Next: write the report."}]


def test_the_newest_turns_that_fit_stay_and_the_older_span_goes_out_whole():
    msgs = talk()
    policy = Policy()
    assert [total_tokens([m]) for m in msgs[1:3]] == [41, 41]
    d = decide(msgs, policy, budget=250, new_id=ids())
    assert d.path == FILL and d.pinned_tokens == total_tokens([msgs[0], msgs[-1]]) == 10
    seg = fill(d.layout, 250)
    assert seg.covers() == {"summary": None, "offloaded": [2, 6], "verbatim_from": 7}
    assert seg.messages[0] == msgs[0] and seg.messages[2:] == msgs[6:]
    assert (
        seg.messages[1]["content"]
        == "[messages 2-6 offloaded: 261 tokens, id ofl_0001; restore_offloaded to read them]"
    )
    [span] = seg.offloads
    assert (span.id, span.role, json.loads(span.body)) == ("ofl_0001", "turns", msgs[1:6])
    assert total_tokens(seg.messages) == 242


def test_a_summary_stands_before_the_marker_and_says_what_it_covers():
    msgs = talk()
    d = decide(msgs, Policy(), budget=250, new_id=ids())
    seg = fill(d.layout, 250, "Compared two options.")
    assert seg.covers() == {"summary": [2, 7], "offloaded": [2, 7], "verbatim_from": 8}
    assert seg.messages[1]["content"] == (
        f"{SUMMARY_HEAD} messages 2-7\nCompared two options.\n"
        "Those messages, as they were: [messages 2-7 offloaded: 313 tokens, id ofl_0001; restore_offloaded to read them]"
    )
    assert fill(d.layout, 250, "too long " * 400) is None  # the caller then fills without it


def test_the_summary_is_asked_of_the_span_that_does_not_fit_less_its_reply_budget():
    msgs = talk()
    layout = layout_of(msgs, Policy(), ids())
    assert summary_span(layout, 250, 0) == msgs[1:6]
    assert summary_span(layout, 250, 100) == msgs[1:9]


def test_a_pinned_message_in_the_older_span_stays_where_it_was():
    msgs = talk()
    msgs[2] = {**msgs[2], "pinned": True}
    seg = fill(layout_of(msgs, Policy(), ids()), 250)
    assert seg.messages[:3] == [msgs[0], {"role": "user", "content": seg.messages[1]["content"]}, msgs[2]]
    assert seg.messages[1]["content"].startswith("[messages 2-")
    assert msgs[2] not in json.loads(seg.offloads[-1].body)


def test_the_room_left_gives_bodies_back_newest_first():
    body = "row 7 ok; " * 60  # 301 tokens
    msgs = [{"role": "user", "content": "go"}]
    for k in range(3):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "q", "arguments": "{}"}}
        msgs += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{k}", "content": body},
        ]
    draft = clearing_draft(msgs, Policy(keep_rounds=0), None, ids())
    cleared = total_tokens(draft.messages)
    out = top_up(draft.messages, draft.offloads, cleared + 301 + 60, Policy())
    assert out[6]["content"] == body  # the newest comes back whole
    assert out[4]["content"].startswith(marker("ofl_0002", 301) + "\nIts first part:\nrow 7 ok;")
    assert out[2] == draft.messages[2]
    assert total_tokens(out) <= cleared + 361
    assert [o.id for o in named(out, draft.offloads)] == ["ofl_0001", "ofl_0002"]


def test_over_only_when_the_pinned_part_does_not_fit():
    msgs = talk()
    msgs[-1] = {"role": "assistant", "content": TALK * 30}
    d = decide(msgs, Policy(), budget=300, new_id=ids())
    assert (d.path, d.pinned_tokens) == (CompactionPath.OVER, 365)
    assert [m["role"] for m in d.segment.messages] == ["system", "user", "assistant"]
    assert json.loads(d.segment.offloads[0].body) == msgs[1:-1]


def test_one_counter_named_in_every_answer(tmp_path):
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    tok = Tokenizer(WordLevel({"[UNK]": 0, "hello": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    own = counter_named(str(tmp_path / "tokenizer.json"))
    assert (own.name, own("hello there, world")) == ("tokenizer:tokenizer.json", 4)
    assert counter_named("cl100k").name == "cl100k" and counter_named("cl100k")("hello there, world") == 4
    assert (counter_named("estimate").name, counter_named("estimate")("hello there, world")) == (ESTIMATE, 5)
    assert counter_named(str(tmp_path / "missing.json")).name == ESTIMATE
    msgs = talk(2)
    assert total_tokens(msgs, Policy(tokenizer="estimate").counter) == 112
    assert total_tokens(msgs, Policy().counter) == total_tokens(msgs) == 92


def test_room_still_left_shows_the_end_of_the_offloaded_span():
    msgs = talk()
    seg = fill(layout_of(msgs, Policy(), ids()), 280)
    assert total_tokens(seg.messages) == 242  # the next older turn (41) does not fit
    out = top_up(seg.messages, seg.offloads, 280, Policy())
    mark = seg.messages[1]["content"]
    assert out[1]["content"].startswith(mark + "\nIts last part:\n")
    assert out[1]["content"].endswith(msgs[5]["content"][-80:])  # the newest of the span, its end
    assert 270 <= total_tokens(out) <= 280 and out[2:] == seg.messages[2:]
