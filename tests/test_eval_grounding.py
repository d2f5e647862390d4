"""`dreamer eval grounding` on the dev set: SmolLM2-135M-Instruct's items for unseen LoCoMo-format
conversations and Claude Code transcripts (tests/data/grounding-dev, recorded by its record.py),
labelled by hand, held to the grounding contract without a model."""

from __future__ import annotations

import json
from pathlib import Path

from clikit import assert_one_error_line, run

LABELLED = Path(__file__).parent / "data" / "grounding-dev" / "labelled.json"


def test_the_contract_on_the_hand_labelled_dev_set(tmp_path):
    proc = run(tmp_path, "eval", "grounding", str(LABELLED), "--json", "-")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["items"], result["labelled_grounded"], result["kept"]) == (45, 13, 6)
    # both kept wrongly name a speaker as the subject of what the other speaker said: no name,
    # number or place made up, no bare name, no copy of a card
    assert result["false_accepts"] == ["Tomasz is a medical writer.", "Olu is a baker who loves his bread."]
    reasons = [r["reason"] for r in result["false_rejections"]]
    assert (len(reasons), reasons.count("ungrounded: no cited message")) == (9, 6)
    assert result["rejected"] == {
        "cites no line shown": 13,
        "its words not said": 8,
        "names or numbers never said": 7,
        "states nothing": 4,
        "copies the prompt": 4,
        "a bare name": 3,
    }
    assert proc.stderr.strip() == (
        "eval grounding: 45 item(s), 13 labelled grounded; kept 6: 2 false accept(s), 9 false rejection(s); "
        "refused: cites no line shown 13, its words not said 8, names or numbers never said 7, states nothing 4, "
        "copies the prompt 4, a bare name 3"
    )


def test_a_file_that_is_no_labelled_set_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"file": "x", "session": "s", "lines": [], "items": [{"text": "t"}]}]')
    proc = run(tmp_path, "eval", "grounding", str(bad))
    assert_one_error_line(proc)
    assert "bad.json" in proc.stderr
    missing = run(tmp_path, "eval", "grounding", str(tmp_path / "none.json"))
    assert_one_error_line(missing)
