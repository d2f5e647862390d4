"""LoCoMo importer: sessions per conversation, speakers, captions, times and ordering."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dreamer.ingest import locomo


def turn(speaker: str, dia_id: str, text: str, **extra) -> dict:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def conversations() -> list:
    return [
        {
            "sample_id": "conv-1",
            "conversation": {
                "speaker_a": "Caroline",
                "speaker_b": "Melanie",
                "session_10_date_time": "8:56 pm on 20 July, 2023",
                "session_10": [
                    turn("Caroline", "D10:1", "Back from the lake!"),
                    turn("Melanie", "D10:2", "Welcome back."),
                ],
                "session_2_date_time": "12:09 am on 13 September, 2023",
                "session_2": [
                    turn(
                        "Melanie",
                        "D2:1",
                        "Look at my painting.",
                        img_url=["https://example.org/p.jpg"],
                        blip_caption="a painting of a sunset over a lake",
                        query="sunset painting",
                    ),
                    turn("Caroline", "D2:2", "Beautiful!"),
                ],
            },
            "qa": [{"question": "Q?", "answer": "A", "evidence": ["D2:1"], "category": 4}],
            "observation": {},
            "session_summary": {},
        },
        {
            "sample_id": "conv-2",
            "conversation": {
                "speaker_a": "Jon",
                "speaker_b": "Gina",
                "session_1_date_time": "4:04 pm on 20 January, 2023",
                "session_1": [turn("Jon", "D1:1", "I lost my job."), turn("Gina", "D1:2", "Sorry to hear.")],
                "session_3_date_time": "10:00 am on 1 February, 2023",
                "session_3": [turn("Gina", "D3:1", "Opened my store!")],
            },
        },
    ]


def write(path: Path, value) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_two_conversations_two_sessions_each(tmp_path):
    result = locomo.parse(write(tmp_path / "locomo.json", conversations()), max_message_bytes=10_000)
    assert result.rejections == []
    assert [s.external_id for s in result.sessions] == [
        "conv-1:session_2",
        "conv-1:session_10",
        "conv-2:session_1",
        "conv-2:session_3",
    ]
    s2, s10, j1, j3 = result.sessions
    assert (s2.user_id, s2.title, s2.source) == ("conv-1", "session 2", "locomo")
    assert s2.created_at == datetime(2023, 9, 13, 0, 9, tzinfo=UTC)
    assert [(m.role, m.name, m.content, m.meta) for m in s2.messages] == [
        (
            "assistant",
            "Melanie",
            "Look at my painting. [image: a painting of a sunset over a lake]",
            {"dia_id": "D2:1"},
        ),
        ("user", "Caroline", "Beautiful!", {"dia_id": "D2:2"}),
    ]
    assert [m.created_at for m in s10.messages] == [
        datetime(2023, 7, 20, 20, 56, 0, tzinfo=UTC),
        datetime(2023, 7, 20, 20, 56, 1, tzinfo=UTC),
    ]
    assert [m.role for m in j1.messages] == ["user", "assistant"]
    assert j1.user_id == "conv-2"
    assert j3.messages[0].content == "Opened my store!"
    assert j3.created_at == datetime(2023, 2, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("12:48 am on 1 February, 2023", datetime(2023, 2, 1, 0, 48, tzinfo=UTC)),
        ("12:05 pm on 3 Jan, 2022", datetime(2022, 1, 3, 12, 5, tzinfo=UTC)),
        ("2023-05-08T10:00:00", datetime(2023, 5, 8, 10, 0, tzinfo=UTC)),
        ("sometime", None),
        ("1:56 pm on 31 February, 2023", None),
        (None, None),
    ],
)
def test_date_time(text, expected):
    assert locomo.parse_date_time(text) == expected


def test_malformed_json_is_one_rejection(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[{"sample_id": "conv-1", ', encoding="utf-8")
    result = locomo.parse(path, max_message_bytes=1000)
    assert result.sessions == []
    [rejection] = result.rejections
    assert rejection.line is None
    assert rejection.reason.startswith("invalid JSON")
    assert str(rejection) == f"{path}: {rejection.reason}"


def test_non_utf8_file_is_one_rejection(tmp_path):
    path = tmp_path / "latin.json"
    path.write_bytes(b'[{"sample_id": "caf\xe9"}]')
    result = locomo.parse(path, max_message_bytes=1000)
    assert result.sessions == []
    assert "UTF-8" in result.rejections[0].reason


def test_malformed_turns_and_conversations_are_named(tmp_path):
    data = conversations()
    data[0]["conversation"]["session_2"].insert(1, turn("Stranger", "D2:9", "who am I?"))
    data[0]["conversation"]["session_2"].append({"speaker": "Caroline", "dia_id": "D2:3"})
    data[0]["conversation"]["session_10"].append(turn("Caroline", "D10:3", "w" * 2000))
    data[1]["conversation"]["session_3"] = "not a list"
    data.append({"sample_id": "conv-3"})
    data.append("garbage")
    result = locomo.parse(write(tmp_path / "l.json", data), max_message_bytes=1000)
    assert [s.external_id for s in result.sessions] == ["conv-1:session_2", "conv-1:session_10", "conv-2:session_1"]
    assert [m.content for m in result.sessions[0].messages][1] == "Beautiful!"
    assert result.sessions[0].messages[1].created_at == datetime(2023, 9, 13, 0, 9, 2, tzinfo=UTC)
    reasons = [r.reason for r in result.rejections]
    assert reasons == [
        "conversation 1 (conv-1) session_2 turn 2: unknown speaker 'Stranger'",
        "conversation 1 (conv-1) session_2 turn 4: turn without a 'text' string",
        "conversation 1 (conv-1) session_10 turn 3: message is 2000 bytes, over the 1000-byte limit",
        "conversation 2 (conv-2) session_3: expected a list of turns",
        "conversation 3: expected an object with a 'conversation' object",
        "conversation 4: expected an object with a 'conversation' object",
    ]
    assert all(r.line is None for r in result.rejections)


def test_session_numbers_are_numeric():
    assert locomo.session_numbers({"session_10": [], "session_2": [], "session_1_date_time": "", "session_1": []}) == [
        1,
        2,
        10,
    ]
