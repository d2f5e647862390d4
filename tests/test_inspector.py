"""The inspector at /ui over HTTP: logins and their cookie, CSRF on every form, a user's own
scope only, escaping, and each action with its history event; a live server over a real store."""

from __future__ import annotations

import httpx
import pytest
from onlinekit import ALICE_READER, ALICE_WRITER, BOB_WRITER, bearer
from sqlmodel import col, select
from uikit import ADMIN, HTML_TEXT, SCRIPT_TEXT, csrf_of, live_inspector, login

from dreamer.core.models import Cursor, MemoryEvent, Session
from dreamer.store.db import session_scope

TEA = "The user prefers tea with breakfast."
COFFEE = "The user prefers coffee with breakfast."
GREEN = "The user prefers green tea in the evening."


@pytest.fixture(scope="module")
def ui(tmp_path_factory):
    with live_inspector(tmp_path_factory.mktemp("inspector")) as found:
        yield found


def events(ui, memory_id: str) -> list[str]:
    with session_scope(ui.rt.engine) as s:
        q = select(MemoryEvent.event).where(MemoryEvent.memory_id == memory_id).order_by(col(MemoryEvent.id))
        return list(s.exec(q).all())


def test_a_page_without_a_login_goes_to_the_login_form_and_a_form_is_refused(ui):
    anon = httpx.Client(base_url=ui.url, follow_redirects=False)
    assert anon.get("/ui").status_code == 303
    assert anon.get("/ui").headers["location"] == "/ui/login"
    assert anon.get("/ui/login").status_code == 200
    tea = ui.memory_id(TEA)
    assert anon.post(f"/ui/memories/{tea}/forget", data={"csrf": "x"}).status_code == 403
    assert ui.memory(tea).status != "forgotten"


def test_an_unknown_token_is_refused_and_a_known_one_sets_a_strict_httponly_cookie(ui):
    anon = httpx.Client(base_url=ui.url, follow_redirects=False)
    assert anon.post("/ui/login", data={"token": "not-a-token-at-all-000"}).status_code == 401
    r = anon.post("/ui/login", data={"token": ALICE_WRITER})
    assert r.status_code == 303
    cookie = r.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "path=/ui" in cookie


def test_a_user_sees_only_their_own_memories_and_the_admin_sees_everyone(ui):
    alice, bob, admin = login(ui.url, ALICE_WRITER), login(ui.url, BOB_WRITER), login(ui.url, ADMIN)
    assert TEA in alice.get("/ui").text and GREEN not in alice.get("/ui").text
    assert GREEN in bob.get("/ui").text and TEA not in bob.get("/ui").text
    assert TEA in admin.get("/ui").text and GREEN in admin.get("/ui").text
    tea = ui.memory_id(TEA)
    assert bob.get(f"/ui/memories/{tea}").status_code == 404  # one user's cookie cannot open another's
    csrf = csrf_of(bob)
    assert bob.post(f"/ui/memories/{tea}/forget", data={"csrf": csrf}).status_code == 404
    assert ui.memory(tea).status != "forgotten"


def test_search_and_filters_narrow_the_list(ui):
    alice = login(ui.url, ALICE_WRITER)
    page = alice.get("/ui", params={"q": "WINDOW"}).text
    assert "window seats" in page and TEA not in page
    held = alice.get("/ui", params={"status": "review_required"}).text
    assert TEA in held and "jazz" not in held


def test_every_form_needs_the_sessions_csrf_token(ui):
    alice = login(ui.url, ALICE_WRITER)
    jazz = ui.memory_id("The user prefers jazz while working.")
    assert alice.post(f"/ui/memories/{jazz}/confirm").status_code == 403
    assert alice.post(f"/ui/memories/{jazz}/confirm", data={"csrf": "wrong"}).status_code == 403
    other = csrf_of(login(ui.url, ALICE_WRITER))  # another login's token
    assert alice.post(f"/ui/memories/{jazz}/confirm", data={"csrf": other}).status_code == 403
    assert "confirm" not in events(ui, jazz)
    assert alice.post(f"/ui/memories/{jazz}/confirm", data={"csrf": csrf_of(alice)}).status_code == 303
    assert (ui.memory(jazz).status, events(ui, jazz)[-1]) == ("verified", "confirm")


def test_an_edit_is_a_human_record_with_the_old_text_in_history(ui):
    alice = login(ui.url, ALICE_WRITER)
    seats = ui.memory_id("The user prefers window seats.")
    r = alice.post(f"/ui/memories/{seats}/edit", data={"csrf": csrf_of(alice), "text": "The user prefers aisle seats."})
    assert r.status_code == 303 and r.headers["location"] == f"/ui/memories/{seats}"
    m = ui.memory(seats)
    assert (m.text, m.source, m.status) == ("The user prefers aisle seats.", "human", "verified")
    assert events(ui, seats)[-1] == "edit"
    page = alice.get(f"/ui/memories/{seats}").text
    assert "aisle seats" in page and "edited by a person" in page
    empty = alice.post(f"/ui/memories/{seats}/edit", data={"csrf": csrf_of(alice), "text": "   "})
    assert empty.status_code == 400 and "empty" in empty.text
    assert ui.memory(seats).text == "The user prefers aisle seats."


def test_html_in_a_memory_is_shown_escaped(ui):
    refused = httpx.post(
        f"{ui.url}/v1/memories", json={"text": SCRIPT_TEXT, "kind": "preference"}, headers=bearer(ALICE_WRITER)
    )
    assert refused.status_code == 422
    assert refused.json()["detail"] == "not stored: the text tries to steer the memory system (markup_tag)"
    r = httpx.post(
        f"{ui.url}/v1/memories", json={"text": HTML_TEXT, "kind": "preference"}, headers=bearer(ALICE_WRITER)
    )
    assert r.status_code in (200, 201), r.text
    mid = r.json()["memory_id"]
    alice = login(ui.url, ALICE_WRITER)
    for page in (alice.get("/ui").text, alice.get(f"/ui/memories/{mid}").text):
        assert "<b>bold" not in page and "<i>notes" not in page
        assert "&lt;b&gt;bold headings &amp; &#34;quotes&#34; in &lt;i&gt;notes." in page


def test_forget_then_restore_brings_back_the_status_it_had(ui):
    alice = login(ui.url, ALICE_WRITER)
    jazz = ui.memory_id("The user prefers jazz while working.")
    before = ui.memory(jazz).status
    alice.post(f"/ui/memories/{jazz}/forget", data={"csrf": csrf_of(alice), "reason": "not true any more"})
    assert ui.memory(jazz).status == "forgotten"
    assert "not true any more" in alice.get(f"/ui/memories/{jazz}").text
    alice.post(f"/ui/memories/{jazz}/restore", data={"csrf": csrf_of(alice)})
    assert ui.memory(jazz).status == before
    assert events(ui, jazz)[-2:] == ["forget", "restore"]
    again = alice.post(f"/ui/memories/{jazz}/restore", data={"csrf": csrf_of(alice)})
    assert again.status_code == 400  # only a forgotten memory is restored


def test_a_reader_token_may_look_but_not_act(ui):
    reader = login(ui.url, ALICE_READER)
    jazz = ui.memory_id("The user prefers jazz while working.")
    assert reader.get(f"/ui/memories/{jazz}").status_code == 200
    r = reader.post(f"/ui/memories/{jazz}/forget", data={"csrf": csrf_of(reader)})
    assert r.status_code == 403
    assert ui.memory(jazz).status != "forgotten"


def test_the_settings_page_masks_secrets(ui):
    page = login(ui.url, ADMIN).get("/ui/settings").text
    assert "DREAMER_UI_ADMIN_TOKEN" in page and ADMIN not in page and ALICE_WRITER not in page
    assert "DREAMER_GUARD_MIN" in page


def test_a_quarantined_session_is_released_by_its_owner_only(ui):
    alice, bob = login(ui.url, ALICE_WRITER), login(ui.url, BOB_WRITER)
    with session_scope(ui.rt.engine) as s:
        b2 = s.exec(select(Session.id).where(Session.external_id == "b2")).one()
    assert "the model failed 3 times" in bob.get("/ui/sessions").text
    assert "the model failed" not in alice.get("/ui/sessions").text
    assert alice.post(f"/ui/sessions/{b2}/release", data={"csrf": csrf_of(alice)}).status_code == 404
    assert bob.post(f"/ui/sessions/{b2}/release", data={"csrf": csrf_of(bob)}).status_code == 303
    with session_scope(ui.rt.engine) as s:
        cursor = s.get(Cursor, b2)
        assert cursor is not None and (cursor.status, cursor.attempts) == ("ok", 0)


def test_under_review_mode_a_pending_memory_is_accepted_or_rejected_from_its_page(tmp_path):
    with live_inspector(tmp_path, review_mode=True) as ui:
        alice = login(ui.url, ALICE_WRITER)
        queue = alice.get("/ui/review").text
        jazz, seats = (
            ui.memory_id("The user prefers jazz while working."),
            ui.memory_id("The user prefers window seats."),
        )
        assert "jazz while working" in queue and ui.memory(jazz).status == "pending"
        assert alice.post(f"/ui/memories/{jazz}/reject", data={"csrf": csrf_of(alice)}).status_code == 303
        assert (ui.memory(jazz).status, events(ui, jazz)[-1]) == ("rejected", "reject")
        words = {"csrf": csrf_of(alice), "text": "The user prefers aisle seats."}
        assert alice.post(f"/ui/memories/{seats}/edit", data=words).status_code == 303  # accepted in other words
        m = ui.memory(seats)
        assert (m.status, m.text, m.source) == ("verified", "The user prefers aisle seats.", "human")
        assert "jazz while working" not in alice.get("/ui/review").text
        again = alice.post(f"/ui/memories/{jazz}/accept", data={"csrf": csrf_of(alice)})
        assert again.status_code == 400 and "not waiting for review" in again.text


def test_the_trace_page_shows_code_work_sent_to_review(ui):
    with httpx.Client(base_url=ui.url, headers=bearer(ALICE_WRITER), timeout=60) as http:
        shop = {"project": "pay-api", "branch": "main"}
        entry = {**shop, "text": "Refund <b>webhooks</b> retry with the same key", "depends_on": ["interface:refunds"]}
        assert http.post("/v1/experience", json=entry).status_code in (200, 201)
        assert http.post("/v1/projects/changes", json={**shop, "target": "interface:refunds"}).status_code == 200
    page = login(ui.url, ALICE_WRITER).get("/ui/trace", params={"fact": "retry with the same key"}).text
    assert "<h2>Code work</h2>" in page
    assert "entry pay-api@main: Refund &lt;b&gt;webhooks&lt;/b&gt; retry with the same key" in page
    assert '<span class="status status-review_required">review_required</span> · interface:refunds changed' in page
    assert "demote: candidate → review_required (interface:refunds changed)" in page
