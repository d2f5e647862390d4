"""`dreamer eval model` against the scripted server: the figures of a pass, from the endpoint's usage."""

from __future__ import annotations

import json

from clikit import assert_one_error_line, run
from dreamkit import extraction_script

from dreamer.llm.scripted.server import Reply, ScriptedServer


def write_sessions(path) -> None:
    rows = [
        {"messages": [{"role": "user", "content": "I prefer green tea."}, {"role": "assistant", "content": "Noted."}]},
        {"messages": [{"role": "user", "content": "I prefer aisle seats."}, {"role": "assistant", "content": "Ok."}]},
        {"messages": [{"role": "user", "content": "I prefer dark mode."}, {"role": "assistant", "content": "Sure."}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_eval_model_reports_the_figures_of_each_session_dreamed(tmp_path):
    data = tmp_path / "chats.jsonl"
    write_sessions(data)
    script = extraction_script()

    def answer(body: dict) -> Reply:  # each reply also carries one item the client must drop
        reply = json.loads(script(body).content or "{}")
        reply["preference"] = reply.get("preference", []) + [{"text": "x"}]
        return Reply.json(reply)

    with ScriptedServer(answer) as srv:
        env = {"DREAMER_LLM_BASE_URL": srv.url, "DREAMER_LLM_MODEL": "scripted"}
        proc = run(tmp_path, "eval", "model", str(data), "--sessions", "2", "--json", "-", env=env)
        usage = [r["usage"] for r in srv.requests if r["path"].endswith("/chat/completions")]
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert (result["sessions"], result["failed_sessions"], result["memories"], result["llm_calls"]) == (2, 0, 2, 2)
    assert (result["items"], result["valid"], result["grounded"]) == (4, 2, 2)
    assert (result["valid_share"], result["grounded_share"], result["memories_per_session"]) == (0.5, 1.0, 1.0)
    assert result["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage)
    spent = result["prompt_tokens"] + result["completion_tokens"]
    assert result["tokens_per_dialogue_token"] == round(spent / result["dialogue_tokens"], 4)
    assert result["rejected"] == {"dropped from the model's reply": 2}
    assert "eval model scripted: 2 session(s) (0 failed)" in proc.stderr
    assert "grounding: 4 item(s) written, 2 grounded by the contract, 2 stored; rejected: dropped from" in proc.stderr
    assert not (tmp_path / "data").exists()  # the user's store is not touched


def test_eval_model_without_a_model_is_one_line(tmp_path):
    data = tmp_path / "chats.jsonl"
    write_sessions(data)
    proc = run(tmp_path, "eval", "model", str(data))
    assert_one_error_line(proc)
    assert "DREAMER_LLM_BASE_URL" in proc.stderr
