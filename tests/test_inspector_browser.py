"""The inspector driven in headless Chromium (Debian's `chromium`, through Playwright): log in,
search, open a memory, edit it and see the history entry, forget and restore it, accept a held
change, revert a run; a page without the cookie is the login form, a form with a wrong CSRF token
is refused, HTML in a memory shows as text. The pages added since (paging, bulk review, search by
meaning, adding a memory, the context preview, conversations, export, import and forget) are in
`test_inspector_browser_pages.py`. It also makes the README's screenshot."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from onlinekit import ALICE_WRITER, BOB_WRITER, bearer
from sqlmodel import select
from uikit import HTML_TEXT, browser_login, chromium, live_inspector

from dreamer.core.models import MemoryEvent
from dreamer.store.db import session_scope

README_SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "inspector.png"
TEA = "The user prefers tea with breakfast."


@pytest.fixture(scope="module")
def browser():
    with chromium() as found:
        yield found


@pytest.fixture
def ui(tmp_path):
    with live_inspector(tmp_path) as found:
        yield found


def _login(browser, url: str, token: str):
    return browser_login(browser, url, token)


def test_a_person_searches_edits_forgets_and_restores(browser, ui):
    page = _login(browser, ui.url, ALICE_WRITER)
    page.fill("input[name=q]", "window")
    page.click("button:text('Filter')")
    assert page.locator("td a").all_inner_texts() == ["The user prefers window seats."]

    page.click("text=The user prefers window seats.")
    page.fill("textarea[name=text]", "The user prefers aisle seats on long trains.")
    page.click("button:text('Save')")
    assert page.inner_text("#memory-text") == "The user prefers aisle seats on long trains."
    history = page.inner_text("#history")
    assert "edited by a person" in history and "alice (writer)" in history
    assert page.inner_text("#history .history-text .old") == "Old text\nThe user prefers window seats."

    page.fill("input[name=reason]", "changed my mind")
    page.click("button:text('Forget')")
    assert page.inner_text("#memory-status") == "forgotten"
    page.click("button:text('Restore')")
    assert page.inner_text("#memory-status") == "verified"
    events = [row.split("\t")[1] for row in page.locator("#history tr").all_inner_texts()[1:]]
    assert events[-3:] == ["edit", "forget", "restore"]


def test_a_person_accepts_a_held_change_from_the_review_queue(browser, ui):
    page = _login(browser, ui.url, ALICE_WRITER)
    page.click("header >> text=Review")
    page.click(f"text={TEA}")
    page.click("button:text('Accept the held change')")
    assert page.inner_text("#memory-status") == "superseded"
    page.click("header >> text=Review")
    assert TEA not in page.inner_text("main")


def test_a_person_reverts_a_run(browser, ui):
    page = _login(browser, ui.url, ALICE_WRITER)
    page.click("header >> text=Runs")
    page.click(f"td a:text-is('{ui.held_run}')")
    page.click("button:text('Revert this run')")
    assert page.url.endswith(f"/ui/runs/{ui.held_run}"), page.inner_text("main")
    undone = [row.split("\t")[-1] for row in page.locator("#changes tr").all_inner_texts()[1:]]
    assert undone and set(undone) == {"yes"}  # every change of the run undone
    assert ui.memory(ui.memory_id(TEA)).status == "candidate"  # the hold undone: current again
    assert ui.memory(ui.memory_id("The user prefers coffee with breakfast.")).status == "reverted"
    with session_scope(ui.rt.engine) as s:
        reverts = s.exec(select(MemoryEvent).where(MemoryEvent.event == "revert")).all()
    assert reverts and {e.data["actor"] for e in reverts} == {"alice (writer)"}  # who asked, on each


def test_no_cookie_no_page_and_a_wrong_csrf_token_is_refused(browser, ui):
    fresh = browser.new_context()
    page = fresh.new_page()
    page.goto(f"{ui.url}/ui/runs")
    assert page.url.endswith("/ui/login")
    page = _login(browser, ui.url, ALICE_WRITER)
    tea = ui.memory_id(TEA)
    page.goto(f"{ui.url}/ui/memories/{tea}")
    page.eval_on_selector("form[action$='/confirm'] input[name=csrf]", "e => e.value = 'forged'")
    page.click("button:text('Confirm')")
    assert "CSRF" in page.inner_text("main")
    assert ui.memory(tea).status == "review_required"


def test_html_shows_as_text_and_another_users_memory_is_not_found(browser, ui, tmp_path):
    import httpx

    r = httpx.post(
        f"{ui.url}/v1/memories", json={"text": HTML_TEXT, "kind": "preference"}, headers=bearer(ALICE_WRITER)
    )
    assert r.status_code in (200, 201), r.text
    mid = r.json()["memory_id"]
    page = _login(browser, ui.url, ALICE_WRITER)
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{ui.url}/ui/memories/{mid}")
    assert page.inner_text("#memory-text") == HTML_TEXT  # shown as the text it is
    assert page.locator("main b, main i").count() == 0 and dialogs == []
    page.goto(f"{ui.url}/ui")
    # the README's picture, made anew with DREAMER_SCREENSHOT=1
    shot = README_SCREENSHOT if os.environ.get("DREAMER_SCREENSHOT") == "1" else tmp_path / "inspector.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000

    bob = _login(browser, ui.url, BOB_WRITER)
    bob.goto(f"{ui.url}/ui/memories/{mid}")
    assert "no memory" in bob.inner_text("main")


def test_a_person_accepts_a_pending_memory_under_review_mode(browser, tmp_path):
    with live_inspector(tmp_path, review_mode=True) as ui:
        jazz = "The user prefers jazz while working."
        assert ui.memory(ui.memory_id(jazz)).status == "pending"
        page = _login(browser, ui.url, ALICE_WRITER)
        page.click("header >> text=Review")
        page.click(f"text={jazz}")
        page.click("button:text-is('Accept')")
        assert page.inner_text("#memory-status") == "candidate"
        assert "accepted in review" in page.inner_text("#history")
        page.click("header >> text=Review")
        assert jazz not in page.inner_text("main")
