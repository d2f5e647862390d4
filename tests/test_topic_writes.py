"""Agent writes with and without a topic, through the HTTP API (a real uvicorn server, no
model): a newer value of a single-valued topic supersedes the old one, a restatement says it
merged, and recall and the context block read the current value as current."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from dreamkit import EMBED_DIM
from onlinekit import ALICE_WRITER, LiveServer, bearer, online_runtime, online_settings
from sqlmodel import select

from dreamer.core.models import Memory, MemoryEvent
from dreamer.core.scope import Scope
from dreamer.index.contract import SearchFilter
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.online.recall import context, newest_in_slot, only_newest_in_slot, recall
from dreamer.store import cabinet
from dreamer.store.db import session_scope

H = bearer(ALICE_WRITER)
ALICE = Scope("alice")


@pytest.fixture
def api(settings, sqlite_engine, tmp_path):
    st = online_settings(settings)
    with ScriptedServer(embed_dim=EMBED_DIM) as scripted:
        rt = online_runtime(st, sqlite_engine, scripted, EdgeIndex(tmp_path / "edge", EMBED_DIM), llm=False)
        try:
            with LiveServer(create_app(rt)) as live, httpx.Client(base_url=live.url, timeout=60) as client:
                yield rt, client
        finally:
            rt.close()


def write(client, text: str, **extra) -> dict:
    r = client.post("/v1/memories", headers=H, json={"text": text, "kind": "profile", **extra})
    assert r.status_code == 200, r.text
    return r.json()


def stored(rt, memory_id: str) -> Memory:
    with session_scope(rt.engine) as s:
        return s.get_one(Memory, memory_id)


def test_a_write_with_a_topic_holds_the_older_value_for_review(api):
    """Without a model a newer value of a slot is proposed, never applied: the old one stays
    current, held for a person's word on the change."""
    rt, client = api
    old = write(client, "Alice's team standup is run from the Lisbon office.", topic="Home City")
    new = write(client, "Alice relocated; she is now settled down by the sea.", topic="location")

    assert (old["action"], old["topic"]) == ("added", "home_city")
    assert (new["action"], new["superseded"], new["topic"]) == ("held", [], "home_city")
    kept = stored(rt, old["memory_id"])
    assert (kept.status, kept.superseded_by) == ("review_required", None)
    with session_scope(rt.engine) as s:
        [event] = s.exec(
            select(MemoryEvent).where(MemoryEvent.memory_id == old["memory_id"], MemoryEvent.event == "hold")
        ).all()
    assert event.reason == "may have changed: newer value of home_city (no judgement, held for review)"
    recorded = {k: event.data[k] for k in ("by", "status")}
    assert recorded == {"by": new["memory_id"], "status": ["candidate", "review_required"]}


def test_a_write_without_a_topic_is_routed_by_its_phrasing(api):
    rt, client = api
    old = write(client, "The user works at Initech.")
    new = write(client, "The user joined Globex as a designer in March.")
    hobby = write(client, "The user took up pottery.")
    another = write(client, "The user has a hobby: chess.")

    assert (new["action"], new["superseded"], new["topic"]) == ("held", [], "employer")
    assert (hobby["topic"], another["action"]) == ("hobbies", "added")
    with session_scope(rt.engine) as s:
        current = {m.id for m in cabinet.current_memories(s, "alice")}
    assert current == {old["memory_id"], new["memory_id"], hobby["memory_id"], another["memory_id"]}


def test_a_restatement_says_it_merged(api):
    _, client = api
    first = write(client, "The user prefers short answers.")
    again = write(client, "the user prefers SHORT answers!")
    assert (again["action"], again["into"], again["memory_id"]) == ("merged", first["memory_id"], first["memory_id"])


def test_a_topic_that_is_too_long_is_refused(api):
    _, client = api
    r = client.post("/v1/memories", headers=H, json={"text": "The user likes tea.", "topic": "x" * 65})
    assert r.status_code == 422
    r = client.post("/v1/memories", headers=H, json={"text": "The user likes tea.", "cardinality": "some"})
    assert r.status_code == 422


def test_recall_and_context_read_an_unjudged_change_as_may_have_changed(api):
    rt, client = api
    old = write(client, "These days the user writes code in Emacs.", topic="editor")
    new = write(client, "The user switched to Neovim.", topic="editor")

    hits = recall(rt, "which editor does the user use", ALICE, k=5).hits
    assert [(h.memory_id, h.status, h.changed_with) for h in hits] == [
        (new["memory_id"], "candidate", old["memory_id"]),
        (old["memory_id"], "review_required", new["memory_id"]),
    ]
    block = context(rt, ALICE)
    assert block.memory_ids == [new["memory_id"], old["memory_id"]]
    assert "- These days the user writes code in Emacs. (may have changed)" in block.text.splitlines()


def test_a_present_state_shows_when_it_was_last_confirmed(api):
    rt, client = api
    m = write(client, "These days the user writes code in Emacs.", topic="editor")
    day = stored(rt, m["memory_id"]).last_seen.date().isoformat()
    block = context(rt, ALICE)
    assert f"- These days the user writes code in Emacs. (as of {day})" in block.text.splitlines()
    [hit] = recall(rt, "Emacs", ALICE).hits
    assert hit.as_json()["last_seen"].startswith(day)


class Row:
    def __init__(self, name: str, topic: str | None, cardinality: str | None, days_ago: int) -> None:
        self.name, self.topic, self.cardinality, self.status = name, topic, cardinality, "candidate"
        self.valid_from = datetime(2024, 6, 1, tzinfo=UTC) - timedelta(days=days_ago)


def test_two_current_values_of_one_slot_read_newest_first():
    rows = [
        Row("old city", "home_city", "one", 30),
        Row("tea", None, None, 5),
        Row("new city", "home_city", "one", 1),
        Row("chess", "hobbies", "many", 50),
        Row("pottery", "hobbies", "many", 2),
    ]
    assert [r.name for r in newest_in_slot(rows)] == ["new city", "tea", "old city", "chess", "pottery"]
    assert [r.name for r in only_newest_in_slot(rows)] == ["new city", "tea", "chess", "pottery"]
    rows[2].status = "superseded"  # history is not a current value
    assert [r.name for r in newest_in_slot(rows)] == ["old city", "tea", "new city", "chess", "pottery"]


def test_the_payload_of_an_indexed_memory_carries_its_topic(api):
    rt, client = api
    m = write(client, "The user lives in Oslo.")
    [hit] = rt.index.search_text("Oslo", ALICE, 1, SearchFilter())
    assert (hit.memory_id, hit.payload["topic"]) == (m["memory_id"], "home_city")
