"""The outbox: index writes, then the users' Markdown views marked due in the same transaction
that marks the rows indexed, rendered later and cleared only if still the mark the renderer read."""

from __future__ import annotations

from dreamer.core.settings import Settings
from dreamer.engine import outbox
from dreamer.engine.markdown import views as markdown
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.store import cabinet
from dreamer.store.db import session_scope


def runtime(tmp_path, engine) -> Runtime:
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", embedder="none")
    index = EdgeIndex(tmp_path / "index", settings.embed_dim)
    return Runtime.open(settings, engine=engine, llm=None, embedder=None, index=index)


def add(engine, user_id: str, text: str) -> str:
    with session_scope(engine) as s:
        m = cabinet.add_memory(
            s, user_id=user_id, kind="profile", text=text, source="dream", evidence=[{"session_id": 1, "seqs": [1]}]
        )
        return m.id


def dreams(rt, user_id: str) -> str:
    path = markdown.user_dir(rt.settings.workspace_dir, user_id) / markdown.DREAMS_FILE
    return path.read_text() if path.exists() else ""


def test_deferred_views_wait_in_sql_until_a_drain_renders_them(tmp_path, engine):
    rt = runtime(tmp_path, engine)
    add(engine, "ada", "Ada works on the billing service.")
    add(engine, "bob", "Bob keeps bees.")
    assert outbox.drain(rt, render=False) == 2
    first = dict(outbox.due_views(engine))
    assert sorted(first) == ["ada", "bob"]
    assert dreams(rt, "ada") == ""  # not rendered yet: a killed pass leaves exactly this behind
    add(engine, "ada", "Ada moved to Lisbon.")
    assert outbox.drain(rt, render=False) == 1
    again = dict(outbox.due_views(engine))
    assert again["bob"] == first["bob"] and again["ada"] != first["ada"]  # a new mark, a new token

    assert outbox.drain(rt, users=["bob"]) == 0  # nothing left to index; bob's view is rendered
    assert [u for u, _ in outbox.due_views(engine)] == ["ada"]
    assert "Bob keeps bees." in dreams(rt, "bob") and dreams(rt, "ada") == ""
    assert outbox.drain(rt) == 0  # every due view
    assert outbox.due_views(engine) == []
    assert "Ada works on the billing service." in dreams(rt, "ada") and "Ada moved to Lisbon." in dreams(rt, "ada")
    assert "Bob keeps bees." in dreams(rt, "bob")
    rt.index.close()
    rt.close()


def test_clear_due_keeps_a_mark_made_after_the_one_read(tmp_path, engine):
    rt = runtime(tmp_path, engine)
    add(engine, "ada", "Ada works on the billing service.")
    outbox.drain(rt, render=False)
    [(user_id, token)] = outbox.due_views(engine)  # a renderer read the mark ...
    add(engine, "ada", "Ada moved to Lisbon.")
    outbox.drain(rt, render=False)  # ... another writer marked the view again meanwhile
    assert outbox.clear_due(engine, user_id, token) is False
    [(_, newer)] = outbox.due_views(engine)
    assert newer != token
    assert outbox.clear_due(engine, "ada", newer) is True
    assert outbox.due_views(engine) == []
    assert outbox.render_due(rt) == 0
    rt.index.close()
    rt.close()
