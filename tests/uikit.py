"""A live inspector for the tests: a real store (SQLite, Qdrant Edge), two real dream passes over
the scripted server (the second's supersession held by the guard for review), the API served by
uvicorn on 127.0.0.1, and the tokens of `onlinekit.TOKENS` plus an admin token."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from dreamkit import judged_by_word, make_index, make_runtime, user_turns
from onlinekit import TOKENS, LiveServer
from sqlmodel import select

from dreamer.core.models import Cursor, Memory, Session, utcnow
from dreamer.core.settings import Settings
from dreamer.engine.dream import dream_pass
from dreamer.engine.runtime import Runtime
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import cabinet, db, gate
from dreamer.store.db import session_scope

ADMIN = "inspector-admin-token-0123456789"
# markup the gate lets through (a lone opening tag is text), so the pages must escape it
HTML_TEXT = 'The user prefers <b>bold headings & "quotes" in <i>notes.'
# a closing tag is markup that acts: the gate refuses it on every path
SCRIPT_TEXT = 'The user prefers <script>alert("x")</script> and <b>bold</b>.'


@dataclass
class Inspector:
    url: str
    rt: Runtime
    first_run: int
    held_run: int

    def memory_id(self, text: str) -> str:
        with session_scope(self.rt.engine) as s:
            return s.exec(select(Memory.id).where(Memory.text == text)).one()

    def memory(self, memory_id: str) -> Memory:
        with session_scope(self.rt.engine) as s:
            m = s.get(Memory, memory_id)
            assert m is not None
            s.expunge(m)
            return m


@contextmanager
def live_inspector(root: Path, **overrides: object) -> Iterator[Inspector]:
    settings = Settings(_env_file=None, data_dir=root / "data").model_copy(
        update={
            "api_tokens": json.dumps(TOKENS),
            "ui_admin_token": ADMIN,
            "guard_min": 0,
            "guard_share": 0.0,  # every supersession waits for a person
            "ambiguous_low": 0.3,
            "dup_threshold": 0.99,
            **overrides,
        }
    )
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    with ScriptedServer(embed_dim=64) as scripted:
        scripted.set_script(judged_by_word("coffee"))
        rt = make_runtime(settings, engine, scripted, make_index("edge", root))
        try:
            first, held = _dream(rt)
            with LiveServer(create_app(rt)) as server:
                yield Inspector(server.url, rt, first, held)
        finally:
            rt.close()
            engine.dispose()


def _dream(rt: Runtime) -> tuple[int, int]:
    """Alice: tea and window seats, then coffee (held) and jazz; Bob: green tea; one of
    Bob's sessions quarantined."""
    record_messages(
        rt.engine, "a1", user_turns("I prefer tea with breakfast.", "I prefer window seats."), user_id="alice"
    )
    record_messages(rt.engine, "b1", user_turns("I prefer green tea in the evening."), user_id="bob")
    first = dream_pass(rt)
    record_messages(
        rt.engine,
        "a2",
        user_turns("I prefer coffee with breakfast.", "I prefer jazz while working."),
        user_id="alice",
    )
    held = dream_pass(rt)
    assert held.held == 1 or rt.settings.review_mode, "the guard holds the coffee supersession"
    record_messages(rt.engine, "b2", user_turns("I prefer long walks."), user_id="bob")
    with session_scope(rt.engine) as s:
        b2 = s.exec(select(Session).where(Session.external_id == "b2")).one()
        cursor = s.get(Cursor, b2.id) or Cursor(session_id=b2.id)
        cursor.status, cursor.attempts, cursor.last_error = "quarantined", 3, "the model failed 3 times"
        s.add(cursor)
    assert first.id is not None and held.id is not None
    return first.id, held.id


def login(url: str, token: str) -> httpx.Client:
    """A client logged in to the inspector with `token` (its cookie kept)."""
    client = httpx.Client(base_url=url, follow_redirects=False)
    r = client.post("/ui/login", data={"token": token})
    assert r.status_code == 303, r.text
    return client


def csrf_of(client: httpx.Client, path: str = "/ui") -> str:
    page = client.get(path).text
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[start : page.index('"', start)]


def fill_store(rt: Runtime, user_id: str, *, current: int, pending: int) -> None:
    """`current` memories and `pending` ones waiting for review for `user_id`, written as a pass
    writes them (through the gate, each with its `add` event), indexed already so no drain waits
    on them."""
    now = utcnow()
    rows, events = [], []
    for i in range(current + pending):
        waits = i >= current
        text = f"The user {'might like' if waits else 'likes'} item number {i:04d}."
        row = gate.memory_row(user_id=user_id, kind="preference", text=text, source="dream", evidence=[], now=now)
        row["status"] = "pending" if waits else "candidate"
        row["indexed_at"] = now
        rows.append(row)
        events.append(cabinet.event_row(row["id"], "add", reason="learnt in bulk", now=now))
    with session_scope(rt.engine) as s:
        gate.insert_memories(s, rows, events)


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium (Debian's `chromium`, through Playwright); skipped when it is absent
    (failed where the services are required)."""
    import shutil

    import pytest
    from conftest import services_required
    from playwright.sync_api import sync_playwright

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        message = "no chromium on PATH (apt-get install chromium)"
        if services_required():
            pytest.fail(message)
        pytest.skip(message)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        try:
            yield browser
        finally:
            browser.close()


def browser_login(browser: Any, url: str, token: str, context: Any = None) -> Any:
    """A new page of `browser` (or of `context`, whose cookies are its own) logged in to the
    inspector with `token`."""
    context = context or browser.new_context(viewport={"width": 1200, "height": 800})
    page = context.new_page()
    page.goto(f"{url}/ui")
    assert page.url.endswith("/ui/login")  # no cookie: the login form
    page.fill("input[name=token]", token)
    page.click("form[action='/ui/login'] button")
    page.wait_for_url(f"{url}/ui")
    return page
