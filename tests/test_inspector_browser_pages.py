"""The inspector's lists and newer pages driven in headless Chromium (Debian's `chromium`, through
Playwright): a store of 1,000 memories, 300 of them waiting for review, paged through to the last
row; a bulk accept of 50 sent as one request and recorded per memory; a held change old beside
new; a reader shown no button it cannot use; the style sheet loaded under the page's CSP; search
by meaning; adding a memory; a short id; the context preview; the conversation browser down to
forgetting a session (the list first); export and import (the dry run first). With
`DREAMER_SCREENSHOT=1` it makes the docs' pictures of the review queue and a conversation."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from onlinekit import ALICE_READER, ALICE_WRITER
from sqlmodel import col, select
from uikit import ADMIN, browser_login, chromium, fill_store, live_inspector

from dreamer.core.models import Memory, MemoryEvent
from dreamer.store.db import session_scope

DOCS = Path(__file__).resolve().parents[1] / "docs"
TEA = "The user prefers tea with breakfast."
COFFEE = "The user prefers coffee with breakfast."
JAZZ = "The user prefers jazz while working."


@pytest.fixture(scope="module")
def browser():
    with chromium() as found:
        yield found


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """The live inspector with carol's 1,000 memories, 300 of them pending review."""
    with live_inspector(tmp_path_factory.mktemp("big")) as found:
        fill_store(found.rt, "carol", current=700, pending=300)
        yield found


@pytest.fixture
def ui(tmp_path):
    with live_inspector(tmp_path) as found:
        yield found


def shot(page, name: str, tmp_path: Path) -> None:
    """A picture of the page: the docs' own with DREAMER_SCREENSHOT=1, else a throwaway one."""
    target = DOCS / name if os.environ.get("DREAMER_SCREENSHOT") == "1" else tmp_path / name
    page.screenshot(path=str(target), full_page=True)
    assert target.stat().st_size > 10_000


def words(text: str) -> str:
    return " ".join(text.split())


def ids_on(page) -> list[str]:
    return [
        h.split("/")[-1]
        for h in page.locator("table a[href^='/ui/memories/']").evaluate_all(
            "links => links.map(a => a.getAttribute('href'))"
        )
    ]


def page_through(page, url: str) -> tuple[list[str], int]:
    """Every memory id of a list, following its Next link to the last page; and the pages seen."""
    page.goto(url)
    seen, pages = ids_on(page), 1
    while page.locator("a.next").count():
        page.locator("a.next").first.click()
        page.wait_for_load_state()
        seen += ids_on(page)
        pages += 1
    return seen, pages


def test_a_thousand_memories_and_three_hundred_review_items_page_through_to_the_last(browser, big):
    page = browser_login(browser, big.url, ADMIN)
    page.select_option("form#filters select[name=user]", "carol")
    page.click("form#filters button")
    assert page.inner_text(".pager .total") == "1,000"
    memories, pages = page_through(page, page.url)
    assert pages == 20 and len(memories) == len(set(memories)) == 1000
    assert "memories 951–1,000 of 1,000" in page.inner_text(".pager")
    queue, pages = page_through(page, f"{big.url}/ui/review?user=carol")
    assert pages == 6 and len(set(queue)) == 300 and page.inner_text(".pager .total") == "300"
    with session_scope(big.rt.engine) as s:
        waiting = set(s.exec(select(Memory.id).where(Memory.user_id == "carol", Memory.status == "pending")).all())
    assert set(queue) == waiting


def test_a_bulk_accept_of_fifty_is_one_action_recorded_per_memory(browser, big):
    page = browser_login(browser, big.url, ADMIN)
    page.goto(f"{big.url}/ui/review?user=carol")
    before = page.inner_text(".pager .total")
    page.click("#tick-all")
    ticked = page.locator("input[name=ids]:checked").evaluate_all("boxes => boxes.map(b => b.value)")
    assert len(ticked) == 50
    posts: list[str] = []
    page.on("request", lambda r: posts.append(r.url) if r.method == "POST" else None)
    page.click("button:text('Accept ticked')")
    assert "Accepted 50 memories in one action" in words(page.inner_text("#done"))
    assert posts == [f"{big.url}/ui/review/bulk"]  # one action for the fifty
    assert (before, page.inner_text(".pager .total")) == ("300", "250")
    with session_scope(big.rt.engine) as s:
        rows = s.exec(select(MemoryEvent).where(col(MemoryEvent.memory_id).in_(ticked), MemoryEvent.event == "accept"))
        accepted = {e.memory_id: e.data["actor"] for e in rows}
        statuses = set(s.exec(select(Memory.status).where(col(Memory.id).in_(ticked))).all())
    assert accepted == dict.fromkeys(ticked, "admin") and statuses == {"candidate"}


def test_a_held_change_is_shown_old_beside_new_and_a_reader_sees_no_button(browser, ui, tmp_path):
    page = browser_login(browser, ui.url, ALICE_WRITER)
    page.click("header >> text=Review")
    [row] = [r for r in page.locator("#queue tr").all_inner_texts() if TEA in r]
    assert row.index(TEA) < row.index(COFFEE)
    shot(page, "inspector-review.png", tmp_path)
    page.goto(f"{ui.url}/ui/memories/{ui.memory_id(TEA)}")
    assert words(page.inner_text("#held-old")) == f"Now {TEA}"
    assert words(page.inner_text("#held-new")) == f"After accepting {COFFEE}"
    left, right = page.locator("#held-old").bounding_box(), page.locator("#held-new").bounding_box()
    assert left["x"] < right["x"] and abs(left["y"] - right["y"]) < 2  # side by side
    header = page.eval_on_selector("header", "e => getComputedStyle(e).backgroundColor")
    assert header == "rgb(35, 38, 58)"  # the style sheet loads under the page's policy
    reader = browser_login(browser, ui.url, ALICE_READER, context=browser.new_context())
    reader.goto(page.url)
    assert reader.locator("button").all_inner_texts() == ["Log out"]
    assert words(reader.inner_text("#held-new")) == f"After accepting {COFFEE}"
    reader.goto(f"{ui.url}/ui/review")
    assert reader.locator("input[type=checkbox]").count() == 0 and reader.locator("main button").count() == 0


def test_search_by_meaning_add_a_memory_and_open_it_by_its_short_id(browser, ui):
    page = browser_login(browser, ui.url, ALICE_WRITER)
    page.fill("form#filters input[name=q]", "what music does the user like when working")
    page.select_option("select[name=how]", "meaning")
    page.click("form#filters button")
    assert JAZZ in page.locator("#memories td a").all_inner_texts()
    page.goto(f"{ui.url}/ui")
    page.fill("#add-memory textarea[name=text]", "The user prefers oat milk in coffee.")
    page.click("#add-memory button")
    assert page.inner_text("#memory-text") == "The user prefers oat milk in coffee."
    assert page.inner_text("#memory-status") == "verified"
    assert "added by a person" in page.inner_text("#history") and "alice (writer)" in page.inner_text("#history")
    full = page.url.rsplit("/", 1)[-1]
    page.goto(f"{ui.url}/ui/memories/{full[:12]}")
    assert page.inner_text("#memory-text") == "The user prefers oat milk in coffee."


def test_the_context_preview_and_a_conversation_down_to_forgetting_it(browser, ui, tmp_path):
    page = browser_login(browser, ui.url, ALICE_WRITER)
    page.click("header >> text=Context")
    block = page.inner_text("#context-block")  # the held change: both sides served, the newer first
    assert f"- {COFFEE} (may have changed)" in block and f"- {TEA} (may have changed)" in block
    assert block.index(COFFEE) < block.index(TEA)
    page.click("header >> text=Conversations")
    assert page.inner_text(".pager .total") == "2"
    page.click("#conversations >> text=a2")
    assert "I prefer jazz while working." in page.inner_text("#messages")
    assert JAZZ in page.inner_text("#produced")
    shot(page, "inspector-conversation.png", tmp_path)
    page.click("#forget-session")
    jazz = ui.memory_id(JAZZ)
    assert JAZZ in page.inner_text("#forget-list") and ui.memory(jazz).status == "candidate"
    page.click("#forget-confirm button")
    assert page.inner_text("h1") == "Forgot session a2"
    with session_scope(ui.rt.engine) as s:  # forgotten means gone: no row keeps its text
        assert s.get(Memory, jazz) is None


def test_export_then_import_with_the_dry_run_first(browser, ui, tmp_path):
    page = browser_login(browser, ui.url, ADMIN)
    page.click("header >> text=Records")
    page.select_option("#export select[name=user]", "alice")
    with page.expect_download() as download:
        page.click("#export button")
    path = tmp_path / "alice.jsonl"
    download.value.save_as(path)
    recs = [json.loads(line) for line in path.read_text().splitlines()]
    assert recs[0]["user_id"] == "alice" and recs[-1]["type"] == "trailer"
    new = next(r for r in recs if r["type"] == "memory")
    new.update(id=uuid.uuid4().hex, text="The user prefers imported honey.", history=[])
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    page.set_input_files("#import input[type=file]", str(path))
    page.click("#import button")
    assert page.inner_text("h1") == "Import: what it would do"
    assert "memories\t1\t" in page.inner_text("#import-counts")
    with session_scope(ui.rt.engine) as s:
        assert s.exec(select(Memory).where(Memory.text == "The user prefers imported honey.")).first() is None
    page.click("button:text('Import it')")
    assert page.inner_text("h1") == "Imported"
    with session_scope(ui.rt.engine) as s:
        assert s.exec(select(Memory).where(Memory.text == "The user prefers imported honey.")).first() is not None
