"""The compaction summary on a real model (the `realmodel` lane: SmolLM2-135M-Instruct served by
llama_cpp.server, behind the recording proxy). Its answer to the `compact` card is validated and
used, or the older span goes out whole without it; either way the result fits its budget, the
newest turn stays, and the call is billed with what the server said."""

from __future__ import annotations

import pytest
from usagekit import UsageProxy

from dreamer.core.compaction.plan import SUMMARY_HEAD
from dreamer.engine.endpoint import open_llm
from dreamer.online.compaction.compact import compact_messages
from dreamer.store import db

pytestmark = pytest.mark.realmodel

OUTPUT = "invoice inv_{k} total 120.00 EUR status paid region EU-W; " * 40


def task() -> list[dict]:
    msgs = [
        {"role": "system", "content": "You are a careful agent."},
        {"role": "user", "content": "Backfill invoices with their region. Never drop the audit table."},
    ]
    for k in range(20):
        call = {"id": f"c{k}", "type": "function", "function": {"name": "run_sql", "arguments": '{"q": "select"}'}}
        msgs.append({"role": "assistant", "content": f"Checking batch {k} of the invoices.", "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{k}", "content": OUTPUT.format(k=k)})
    return [*msgs, {"role": "assistant", "content": "Next: backfill batch 20."}]


@pytest.fixture
def proxy(smollm2):
    with UsageProxy(smollm2.base_url) as p:
        yield p


def test_a_real_summary_is_validated_or_the_segment_kept(settings, smollm2, proxy):
    st = settings.model_copy(update={"llm_base_url": proxy.url, "llm_model": smollm2.model, "compact_keep_rounds": 1})
    engine = db.make_engine(st.resolved_database_url())
    db.upgrade(engine)
    llm = open_llm(st, engine)
    assert llm is not None
    msgs = task()
    found = compact_messages(st, llm, msgs, budget=600)  # not even every turn cleared fits: a summary is asked
    assert found.model_calls == 1
    assert found.path in ("summary", "offload"), found.reason
    assert found.fits and found.messages[0] == msgs[0] and found.messages[-1] == msgs[-1]
    if found.path == "summary":
        assert found.messages[1]["content"].startswith(f"{SUMMARY_HEAD} messages 2-")
    else:
        assert found.messages[1]["content"].startswith("[messages 2-") and found.reason
    assert (found.prompt_tokens, found.completion_tokens) == proxy.total()
    engine.dispose()
