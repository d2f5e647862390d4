"""Isolation: one store is populated once by real dream passes over many users, agents, projects
and teams; hypothesis then asks it from random scopes. No index search, recall, context, trace,
memory listing or Markdown file ever shows a memory of another scope, and no memory rests on
evidence from another scope. Hostile user ids neither escape the data folder nor collide."""

from __future__ import annotations

import itertools
import os
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dreamkit import is_judgement, judge_reply, transcript_lines
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlmodel import select

from dreamer.core.errors import IngestError
from dreamer.core.models import CURRENT_STATUSES, Memory, Session
from dreamer.core.scope import Scope
from dreamer.core.settings import Settings
from dreamer.engine.dream import dream_pass
from dreamer.engine.markdown import entries as markdown_entries
from dreamer.engine.markdown import views as markdown
from dreamer.index.contract import SearchFilter
from dreamer.ingest.store import record_messages
from dreamer.llm.scripted.server import Reply, ScriptedServer
from dreamer.store import cabinet, db
from dreamer.store.db import session_scope

from . import kit

try:
    from dreamer.online.recall import context, recall
except ImportError:  # the online companion is optional here
    recall = context = None
try:
    from dreamer.online.trace import trace
except ImportError:
    trace = None

pytestmark = pytest.mark.reliability

EXAMPLES = 10_000
USERS = [f"user-{i}" for i in range(6)]
AGENTS = [None, "agent-a", "agent-b"]
PROJECTS = [None, "proj-x", "proj-y"]
TEAMS = [None, "team-1"]
TOPICS = [
    "jazz records",
    "green tea",
    "window seats",
    "dark mode",
    "metric units",
    "night trains",
    "retry loops",
    "connection pools",
    "cache keys",
    "null checks",
]
PREFER = re.compile(r"\bI prefer ([^.!?\n]+)", re.I)


def scripted_model(body: dict) -> Reply:
    """Preferences in agent mode, root causes in code mode, judgements always 'new'."""
    if is_judgement(body):
        return judge_reply(body, "new")
    code = "root_cause" in body["messages"][0]["content"]  # the code-mode instructions name it
    out = []
    for seq, role, context, text in transcript_lines(body):
        m = PREFER.search(text)
        if m and role == "user" and not context:
            what = m.group(1).strip()
            kind, sentence = (
                ("root_cause", f"The root cause was {what}.") if code else ("preference", f"The user prefers {what}.")
            )
            out.append({"kind": kind, "text": sentence, "importance": 0.6, "seqs": [seq]})
    return Reply.json({"memories": out})


@dataclass
class Store:
    rt: object
    workspace: Path
    memories: dict[str, Memory] = field(default_factory=dict)
    sessions: dict[int, Session] = field(default_factory=dict)
    files: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # user -> file -> ids


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """Sessions in every scope combination, the same statements said in many of them."""
    tmp = tmp_path_factory.mktemp("isolation")
    settings = Settings(_env_file=None, data_dir=tmp / "data", min_rounds=1, max_sessions_per_pass=500)
    engine = db.make_engine(settings.resolved_database_url())
    db.upgrade(engine)
    rng = random.Random(11)
    with ScriptedServer(embed_dim=kit.DIM) as server:
        server.set_script(scripted_model)
        rt = kit.runtime(settings, engine, server, tmp)
        for n, (user, agent, project, team) in enumerate(itertools.product(USERS, AGENTS, PROJECTS, TEAMS)):
            mode = "code" if project and n % 2 else "agent"
            tail = " since it fixed the bug" if mode == "code" else ""  # code-mode triage wants a hint
            lines = [f"I prefer {t}{tail}." for t in rng.sample(TOPICS, 2)] + [
                f"I prefer {user} {agent} {project} {team}."
            ]
            record_messages(
                engine,
                f"s{n}",
                kit.session_with(*lines),
                user_id=user,
                agent_id=agent,
                project=project,
                team=team,
                mode=mode,
            )
        while dream_pass(rt).sessions:
            pass
        built = Store(rt, settings.workspace_dir)
        with session_scope(engine) as s:
            built.memories = {m.id: m for m in s.exec(select(Memory)).all()}
            built.sessions = {x.id: x for x in s.exec(select(Session)).all()}
        for user in USERS + ["nobody"]:
            built.files[user] = _read_files(settings.workspace_dir, user)
        yield built
        rt.close()
    engine.dispose()


def _read_files(workspace: Path, user: str) -> dict[str, set[str]]:
    base = markdown.user_dir(workspace, user)
    if not base.exists():
        return {}
    return {
        str(p.relative_to(base)): {e.memory_id for e in markdown_entries.parse_entries(p.read_text(encoding="utf-8"))}
        for p in base.rglob("*.md")
    }


def owner(m) -> tuple:
    return (m.user_id, m.agent_id, m.project, m.team)


def visible(m: Memory, scope: Scope) -> bool:
    return m.user_id == scope.user_id and all(
        getattr(scope, f) is None or getattr(m, f) == getattr(scope, f) for f in ("agent_id", "project", "team")
    )


def test_the_store_is_populated_and_every_memory_rests_on_its_own_scope(store, figures):
    current = [m for m in store.memories.values() if m.status in CURRENT_STATUSES]
    scopes = {owner(m) for m in current}
    figures("isolation: store", f"{len(current)} memories in {len(scopes)} scopes, {len(store.sessions)} sessions")
    assert len(scopes) == len(USERS) * len(AGENTS) * len(PROJECTS) * len(TEAMS)
    for m in current:
        for e in m.evidence:
            assert owner(store.sessions[e["session_id"]]) == owner(m), f"{m.text} rests on another scope"


scope_strategy = st.builds(
    Scope,
    user_id=st.sampled_from(USERS + ["nobody", "user-"]),
    agent_id=st.sampled_from(AGENTS + ["agent-z"]),
    project=st.sampled_from(PROJECTS + ["proj-z"]),
    team=st.sampled_from(TEAMS + ["team-9"]),
)
query_strategy = st.one_of(
    st.sampled_from(TOPICS),
    st.builds(lambda a, b: f"{a} {b}", st.sampled_from(TOPICS), st.sampled_from(USERS + AGENTS[1:] + PROJECTS[1:])),
    st.sampled_from(["the user prefers", "root cause", "team-1", "proj-x", "agent-a user-3"]),
)


def test_no_surface_shows_another_scopes_memory(store, figures):
    ran = 0

    @hsettings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(scope=scope_strategy, query=query_strategy)
    def no_leak(scope, query):
        nonlocal ran
        ran += 1
        check_surfaces(store, scope, query)

    no_leak()
    figures("isolation: hypothesis examples run", ran, "index, recall, context, listing, Markdown; no leak")
    assert ran >= EXAMPLES


def check_surfaces(store: Store, scope: Scope, query: str) -> None:
    rt = store.rt
    vector = rt.embedder.embed([query])[0]
    for hit in rt.index.search_text(query, scope, 40, SearchFilter(statuses=None)) + rt.index.search_dense(
        vector, scope, 40, SearchFilter(statuses=None)
    ):
        assert visible(store.memories[hit.memory_id], scope), ("index", scope, hit.payload)
    if recall is not None:
        for hit in recall(rt, query, scope, k=10, include_all=True).hits:
            assert visible(store.memories[hit.memory_id], scope), ("recall", scope, hit.text)
    if context is not None:
        block = context(rt, scope, budget_tokens=4000)
        assert all(visible(store.memories[i], scope) for i in block.memory_ids), ("context", scope)
        allowed = {store.memories[i].text for i in block.memory_ids}
        assert all(line[2:] in allowed for line in block.text.splitlines()[1:-1]), ("context text", scope)
    with session_scope(rt.engine) as s:
        assert all(m.user_id == scope.user_id for m in cabinet.current_memories(s, scope.user_id)), "listing"
    for name, ids in store.files.get(scope.user_id, {}).items():
        assert all(store.memories[i].user_id == scope.user_id for i in ids), ("markdown", name)
        if name.startswith("coding/") and not name.endswith(markdown.UNSCOPED_PROJECT_FILE):
            assert len({store.memories[i].project for i in ids}) <= 1, ("coding file mixes projects", name)


@pytest.mark.skipif(trace is None, reason="dreamer.trace is not available")
@pytest.mark.parametrize("user", USERS + ["nobody"])
def test_trace_stays_in_its_user(store, user):
    for topic in TOPICS[:4] + [user]:
        found = trace(store.rt, topic, user)
        assert all(store.memories[m.memory_id].user_id == user for m in found.memories)
        assert all(store.sessions[s.session_id].user_id == user for s in found.said)


# --------------------------------------------------------------------------- hostile user ids

HOSTILE_IDS = [
    "../x",
    "../../etc/passwd",
    "/etc/passwd",
    "/",
    ".",
    "..",
    "a/../../b",
    "C:\\Windows\\system32",
    "\\\\server\\share",
    "~root",
    "%2e%2e%2fx",
    "x" * 255,
    "alice",
    "ALICE",
    "Alice",
    "alice ",
    " alice",
    "аlice",
    "alicе",  # Cyrillic a / e
    "ａｌｉｃｅ",
    "alice\u200b",
    "ali\u0301ce",
    "alíce",
    "al\u0131ce",
    "x" * 254 + "/",
    ".hidden",
    "CON",
    "nul",
    "a:b",
    "a*b?",
    "<script>",
    "emoji-😀",
    "rtl-\u202eecila",
]
REFUSED_IDS = ["a\x00b", "\ud800x", "user\nname", "tab\tname", "bell\x07", "esc\x1b[2J"]  # never stored


@given(st.text(min_size=1, max_size=300))
@hsettings(max_examples=3000, deadline=None, database=None, derandomize=True)
def test_a_user_folder_is_always_one_level_under_the_workspace(user_id):
    workspace = Path("/srv/workspace")
    folder = markdown.user_dir(workspace, user_id)
    assert folder.parent == workspace
    assert folder.name not in (".", "..") and "/" not in folder.name and "\x00" not in folder.name
    assert len(folder.name.encode()) <= 255


@given(st.lists(st.text(min_size=1, max_size=40), min_size=2, max_size=8, unique=True))
@hsettings(max_examples=2000, deadline=None, database=None, derandomize=True)
def test_distinct_user_ids_never_share_a_folder(ids):
    names = [markdown.user_dir(Path("w"), u).name for u in ids]
    assert len(set(names)) == len(names)
    assert len({n.casefold() for n in names}) == len(names), "also apart on case-insensitive filesystems"


def test_hostile_user_ids_end_to_end(settings, db_url, tmp_path, figures):
    engine = db.make_engine(db_url)
    db.upgrade(engine)
    with ScriptedServer(embed_dim=kit.DIM) as server:
        server.set_script(scripted_model)
        st_ = settings.model_copy(update={"min_rounds": 1})
        rt = kit.runtime(st_, engine, server, st_.data_dir)
        try:
            for i, user in enumerate(HOSTILE_IDS):
                record_messages(
                    engine,
                    f"s{i}",
                    kit.session_with(f"I prefer item {i}, it fixed the bug."),
                    user_id=user,
                    project="../../../../tmp/evil" if i % 3 == 0 else None,
                    mode="code" if i % 3 == 0 else "agent",
                )
            for bad in REFUSED_IDS:
                with pytest.raises(IngestError):
                    record_messages(engine, "nul", kit.session_with("I prefer x."), user_id=bad)
            while dream_pass(rt).sessions:
                pass
            with session_scope(engine) as s:
                owners = {m.user_id for m in s.exec(select(Memory)).all()}
        finally:
            rt.close()
    engine.dispose()
    data = Path(st_.data_dir).resolve()
    workspace = st_.workspace_dir.resolve()
    outside = [
        p
        for p in tmp_path.rglob("*")
        if p.is_file() and data not in p.resolve().parents and not p.name.startswith("store.db")
    ]
    folders = [p for p in workspace.iterdir() if p.is_dir()]
    figures(
        f"isolation ({db_url.split(':')[0]}): hostile user ids",
        f"{len(HOSTILE_IDS)} ids -> {len(folders)} folders, {len(outside)} files outside the data folder",
    )
    assert owners == set(HOSTILE_IDS)
    assert len(folders) == len(HOSTILE_IDS)
    assert outside == []
    for path in workspace.rglob("*"):
        assert workspace in path.resolve().parents
    assert not Path("/tmp/evil.md").exists()
    assert all(os.sep not in f.name for f in folders)
