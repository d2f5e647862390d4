"""A bad pass undone. Real passes build a user's store; then one pass extracts a burst of junk
and has most of the user's memories judged contradicted. The guard holds those supersessions
for review; reverting the pass puts the current memories (with their evidence, status and
times), the index and the Markdown back as they were. With the guard opened (share 1.0) the
supersessions apply, and the revert still restores everything."""

from __future__ import annotations

import pytest
from dreamkit import judged_by_word

from dreamer.core.models import CURRENT_STATUSES
from dreamer.engine import outbox
from dreamer.engine.dream import dream_pass
from dreamer.engine.records.revert import revert_run
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store import cabinet
from dreamer.store.db import session_scope

from . import kit

pytestmark = pytest.mark.reliability

TOPICS = [
    "breakfast drinks", "weekend hiking", "evening reading", "office music", "winter holidays", "lunch salads",
    "car rentals", "phone calls", "hotel rooms", "movie genres", "board games", "running shoes",
    "coffee beans", "desk chairs", "train seats", "photo editing",
]  # fmt: skip
CONTRADICTED = 12  # of the 16 memories, the bad pass judges these replaced
JUNK = 6
DIM = 256  # wide enough that each bad line's nearest memory is the one of its own topic


@pytest.fixture
def server():
    with ScriptedServer(embed_dim=DIM) as srv:
        srv.set_script(judged_by_word("now"))
        yield srv


def session(lines: list[str]) -> list[dict]:
    return [
        m
        for i, t in enumerate(lines)
        for m in ({"role": "user", "content": t}, {"role": "assistant", "content": f"ok {i}"})
    ]


def state(rt) -> tuple:
    with session_scope(rt.engine) as s:
        rows = cabinet.current_memories(s, "alice")
        memories = sorted((m.id, m.text, m.status, m.evidence, m.importance, m.last_seen, m.updated_at) for m in rows)
    ws = rt.settings.workspace_dir
    files = {str(p.relative_to(ws)): p.read_text() for p in sorted(ws.rglob("*.md"))}
    payloads = rt.index.payloads(outbox.CHECKED_FIELDS)
    return memories, files, {k: v for k, v in payloads.items() if v["status"] in CURRENT_STATUSES}


@pytest.mark.parametrize("share", [0.25, 1.0])
def test_a_bad_pass_is_held_by_the_guard_and_undone(share, settings, engine, server, tmp_path, figures):
    st = settings.model_copy(
        update={
            "ambiguous_low": 0.3,
            "route_max_pairs": 1,
            "dup_threshold": 0.99,
            "entries_per_session": 20,
            "guard_share": share,
        }
    )
    rt = kit.runtime(st, engine, server, tmp_path, dim=DIM)
    try:
        for n in range(4):
            lines = [f"I prefer plain {t}." for t in TOPICS[4 * n : 4 * n + 4]]
            record_messages(rt.engine, f"good-{n}", session(lines), user_id="alice")
        good = dream_pass(rt)
        before = state(rt)
        assert (good.added, len(before[0])) == (16, 16)
        bad_lines = [f"I prefer fancy {t} now." for t in TOPICS[:CONTRADICTED]]
        bad_lines += [f"I prefer junk number {k} forever." for k in range(JUNK)]
        record_messages(rt.engine, "bad", session(bad_lines), user_id="alice")

        bad = dream_pass(rt)

        held = CONTRADICTED if share < 1 else 0
        assert (bad.added, bad.superseded, bad.held) == (CONTRADICTED + JUNK, CONTRADICTED - held, held)
        assert len(state(rt)[0]) == 16 + CONTRADICTED + JUNK - (CONTRADICTED - held)
        result = revert_run(rt.engine, bad.id)
        outbox.drain(rt, users=result.users)
        after = state(rt)
        drift = outbox.check(rt)
    finally:
        rt.close()
    assert (result.applied, len(result.undone)) == (True, 2 * CONTRADICTED + JUNK)
    assert after == before
    assert drift.clean
    figures(
        f"bad pass, guard share {share}: added / superseded / held, then reverted",
        f"{bad.added} / {bad.superseded} / {bad.held} of 16; {len(result.undone)} changes undone, "
        f"{len(after[0])} current memories, {len(after[1])} Markdown files and the index equal to before",
    )
