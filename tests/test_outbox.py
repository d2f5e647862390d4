"""The outbox: index writes, then the users' Markdown views marked due in the same transaction
that marks the rows indexed, rendered later and cleared only at the version rendered."""

from __future__ import annotations

from dreamer import cabinet, markdown, outbox
from dreamer.config import Settings
from dreamer.db import session_scope
from dreamer.index import EdgeIndex
from dreamer.runtime import Runtime


def runtime(tmp_path, engine) -> Runtime:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", embedder="none")
    index = EdgeIndex(tmp_path / "index", settings.embed_dim)
    return Runtime.open(settings, engine=engine, llm=None, embedder=None, index=index)


def add(engine, user_id: str, text: str) -> str:
    with session_scope(engine) as s:
        m = cabinet.add_memory(s, user_id=user_id, kind="profile", text=text, source="dream",
                               evidence=[{"session_id": 1, "seqs": [1]}])
        return m.id


def dreams(rt, user_id: str) -> str:
    path = markdown.user_dir(rt.settings.workspace_dir, user_id) / markdown.DREAMS_FILE
    return path.read_text() if path.exists() else ""


def test_deferred_views_wait_in_sql_until_a_drain_renders_them(tmp_path, engine):
    rt = runtime(tmp_path, engine)
    add(engine, "ada", "Ada works on the billing service.")
    add(engine, "bob", "Bob keeps bees.")
    assert outbox.drain(rt, render=False) == 2
    assert outbox.due_views(engine) == [("ada", 1), ("bob", 1)]
    assert dreams(rt, "ada") == ""  # not rendered yet: a killed pass leaves exactly this behind
    add(engine, "ada", "Ada moved to Lisbon.")
    assert outbox.drain(rt, render=False) == 1
    assert outbox.due_views(engine) == [("ada", 2), ("bob", 1)]

    assert outbox.drain(rt) == 0  # nothing left to index; the due views are rendered all the same
    assert outbox.due_views(engine) == []
    assert "Ada works on the billing service." in dreams(rt, "ada") and "Ada moved to Lisbon." in dreams(rt, "ada")
    assert "Bob keeps bees." in dreams(rt, "bob")
    rt.index.close()
    rt.close()


def test_a_mark_made_while_rendering_is_kept(tmp_path, engine):
    rt = runtime(tmp_path, engine)
    add(engine, "ada", "Ada works on the billing service.")
    outbox.drain(rt, render=False)
    [(user_id, version)] = outbox.due_views(engine)  # a renderer read the mark ...
    add(engine, "ada", "Ada moved to Lisbon.")
    outbox.drain(rt, render=False)  # ... another writer marked the view again meanwhile
    assert outbox.clear_due(engine, user_id, version) is False
    assert outbox.due_views(engine) == [("ada", 2)]
    assert outbox.clear_due(engine, "ada", 2) is True
    assert outbox.due_views(engine) == []
    rt.index.close()
    rt.close()
