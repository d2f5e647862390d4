"""Export, import and forget from the inspector over HTTP, as the CLI does them: an export is
the JSON lines `dreamer export` writes (a user's own only, unless the admin's); an import is the
admin's, checked and run dry first, kept only when confirmed; forgetting a session or a user lists
what would go first and, confirmed, records who asked; a live server over a real store."""

from __future__ import annotations

import json
import uuid

import pytest
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER
from sqlmodel import select
from uikit import ADMIN, csrf_of, live_inspector, login

from dreamer.core.models import Memory, MemoryEvent, Session
from dreamer.store.db import session_scope

JAZZ = "The user prefers jazz while working."
COFFEE = "The user prefers coffee with breakfast."
TEA = "The user prefers tea with breakfast."


@pytest.fixture
def ui(tmp_path):
    with live_inspector(tmp_path) as found:
        yield found


def lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_an_export_is_the_clis_json_lines_of_the_viewers_own_records(ui):
    alice, admin = login(ui.url, ALICE_WRITER), login(ui.url, ADMIN)
    mine = alice.get("/ui/export", params={"user": "bob", "sessions": "1"})  # the user is the login's
    assert mine.status_code == 200 and 'filename="dreamer-alice.jsonl"' in mine.headers["content-disposition"]
    recs = lines(mine.text)
    assert recs[0]["type"] == "header" and recs[0]["user_id"] == "alice" and recs[-1]["type"] == "trailer"
    assert {r["user_id"] for r in recs if r["type"] in ("memory", "session")} == {"alice"}
    assert any(r["type"] == "message" for r in recs)
    everything = lines(admin.get("/ui/export").text)
    assert {r["user_id"] for r in everything if r["type"] == "memory"} == {"alice", "bob"}
    assert not any(r["type"] == "session" for r in everything)  # without the transcripts unless asked
    assert login(ui.url, ALICE_READER).get("/ui/export").status_code == 200  # a reader may read


def test_an_import_is_checked_and_run_dry_before_the_admin_confirms_it(ui):
    admin, alice = login(ui.url, ADMIN), login(ui.url, ALICE_WRITER)
    recs = lines(admin.get("/ui/export", params={"user": "alice"}).text)
    new = next(r for r in recs if r["type"] == "memory" and r["text"] == JAZZ)
    new.update(id=uuid.uuid4().hex, text="The user prefers imported tea.", history=[])
    body = "".join(json.dumps(r) + "\n" for r in recs)
    files = {"file": ("alice.jsonl", body.encode(), "application/x-ndjson")}
    dry = admin.post("/ui/import", data={"csrf": csrf_of(admin)}, files=files)
    assert dry.status_code == 200 and "Import: what it would do" in dry.text
    assert "<tr><td>memories</td><td>1</td><td>" in dry.text  # one new, the rest there already
    assert not _has(ui, "The user prefers imported tea.")  # the dry run kept nothing
    done = admin.post("/ui/import/confirm", data={"csrf": csrf_of(admin)})
    assert done.status_code == 200 and "Imported" in done.text and _has(ui, "The user prefers imported tea.")
    again = admin.post("/ui/import/confirm", data={"csrf": csrf_of(admin)})
    assert again.status_code == 400 and "choose the file again" in again.text
    cut = "".join(json.dumps(r) + "\n" for r in recs[:-1])  # no trailer: refused whole
    files = {"file": ("cut.jsonl", cut.encode(), "application/x-ndjson")}
    refused = admin.post("/ui/import", data={"csrf": csrf_of(admin)}, files=files)
    assert refused.status_code == 400 and "cut short" in refused.text
    files = {"file": ("alice.jsonl", body.encode(), "application/x-ndjson")}
    assert alice.post("/ui/import", data={"csrf": csrf_of(alice)}, files=files).status_code == 403


def _has(ui, text: str) -> bool:
    with session_scope(ui.rt.engine) as s:
        return s.exec(select(Memory.id).where(Memory.text == text)).first() is not None


def test_forgetting_a_session_lists_what_would_go_then_records_who_asked(ui):
    alice, bob = login(ui.url, ALICE_WRITER), login(ui.url, BOB_WRITER)
    plan = alice.get("/ui/forget", params={"session": "a2"})
    assert plan.status_code == 200 and "It would forget 2 memories" in plan.text
    listed = plan.text[plan.text.index('id="forget-list"') :]
    assert JAZZ in listed and COFFEE in listed and TEA not in listed
    assert ui.memory(ui.memory_id(JAZZ)).status == "candidate"  # the list changed nothing
    assert bob.get("/ui/forget", params={"session": "a2"}).status_code == 404  # not bob's session
    jazz = ui.memory_id(JAZZ)
    form = {"csrf": csrf_of(alice), "user": "bob", "session": "a2", "from": "", "to": ""}
    done = alice.post("/ui/forget", data=form)  # the user is the login's, whatever the form says
    assert done.status_code == 200 and "It forgot 2 memories" in done.text
    with session_scope(ui.rt.engine) as s:  # forget means gone: the memory and its history
        assert s.get(Memory, jazz) is None
        assert s.exec(select(MemoryEvent).where(MemoryEvent.memory_id == jazz)).first() is None
    reader = login(ui.url, ALICE_READER)
    assert reader.post("/ui/forget", data={**form, "csrf": csrf_of(reader)}).status_code == 403


def test_only_the_admin_forgets_a_whole_user_and_sees_the_list_first(ui):
    alice, admin = login(ui.url, ALICE_WRITER), login(ui.url, ADMIN)
    assert alice.get("/ui/forget").status_code == 403  # no session: the whole user
    assert alice.get("/ui/forget", params={"session": "a1", "from": "3", "to": "1"}).status_code == 400
    plan = admin.get("/ui/forget", params={"user": "bob"})
    assert plan.status_code == 200 and "It would forget 1 memory" in plan.text and "2 session(s)" in plan.text
    assert _sessions(ui, "bob") == 2
    done = admin.post("/ui/forget", data={"csrf": csrf_of(admin), "user": "bob", "session": ""})
    assert done.status_code == 200 and "It forgot 1 memory" in done.text
    assert _sessions(ui, "bob") == 0 and _sessions(ui, "alice") == 2


def _sessions(ui, user: str) -> int:
    with session_scope(ui.rt.engine) as s:
        return len(s.exec(select(Session.id).where(Session.user_id == user)).all())
