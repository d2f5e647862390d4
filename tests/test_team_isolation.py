"""Two teams never see each other's memory, nor a member's own: property tests over random
teams, members and queries. One over the filter every index search is built from (pure), one
over real recall on one store and Qdrant Edge index built once for the module."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamer.core.models import TEAM_KINDS, Memory
from dreamer.core.scope import OWNER_FIELDS
from dreamer.core.settings import Settings
from dreamer.core.teams import is_team_memory, team_scope
from dreamer.engine import outbox
from dreamer.engine.runtime import Runtime
from dreamer.index.contract import SearchFilter
from dreamer.index.edge import EdgeIndex
from dreamer.index.query import AnyOf, Empty, Equals, conditions
from dreamer.online.teams import Member, team_recall
from dreamer.store import db, gate
from dreamer.store.db import session_scope
from dreamer.store.teams import create_team

USERS = ("alice", "bob")
TEAMS = ("red", "blue", "red-2", "Red")  # near names too: a prefix or another case is another team
AGENTS = ("lead", "coder", "tester")
WORDS = ("postgres", "deadline", "billing", "import", "client", "joins", "budget", "timeout", "review", "cache")
ALL = " ".join(WORDS)

names = st.sampled_from(TEAMS)
maybe = st.one_of(st.none(), st.sampled_from(("x", *TEAMS, *AGENTS)))
payloads = st.fixed_dictionaries(
    {"user_id": st.sampled_from(USERS), "agent_id": maybe, "project": maybe, "team": maybe}
)


def holds(cond: object, payload: dict) -> bool:
    """Whether one filter condition holds for a point's payload (as Qdrant reads it)."""
    if isinstance(cond, Equals):
        return payload.get(cond.key) == cond.value
    if isinstance(cond, Empty):
        return payload.get(cond.key) is None
    if isinstance(cond, AnyOf):
        return payload.get(cond.key) in cond.values
    raise AssertionError(cond)


@settings(max_examples=2000, deadline=None)
@given(user=st.sampled_from(USERS), team=names, payload=payloads)
def test_a_team_search_filter_lets_through_only_that_teams_memory(user, team, payload):
    conds = conditions(team_scope(user, team), SearchFilter(statuses=None, exact_scope=True))
    assert Equals("team", team) in conds and Equals("user_id", user) in conds  # the name is in every filter
    passes = all(holds(c, payload) for c in conds)
    own = payload["user_id"] == user and payload["team"] == team
    assert passes == (own and all(payload[f] is None for f in OWNER_FIELDS if f != "team"))


# --------------------------------------------------------------------------- over real recall


@lru_cache(maxsize=1)
def store() -> Runtime:
    """One store and index for the module: each user's teams hold team memory, and each member
    personal memory bound to its team, every one saying every word: a query reaches them all,
    and only the filter keeps them apart."""
    root = Path(tempfile.mkdtemp(prefix="teams-"))
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    rt = Runtime.open(
        Settings(_env_file=None, data_dir=root),
        engine=engine,
        llm=None,
        embedder=None,
        index=EdgeIndex(root / "edge", 8),
    )
    now = datetime(2026, 12, 1, tzinfo=UTC)
    rows = []
    for user in USERS:
        for t, team in enumerate(TEAMS):
            create_team(engine, user, team, "lead")
            for k, kind in enumerate(TEAM_KINDS):
                text = f"Team {team} of {user} noted {WORDS[(t + k) % 10]} ({kind}): {ALL}."
                rows.append(
                    gate.memory_row(user_id=user, team=team, kind=kind, text=text, source="team", evidence=[], now=now)
                )
            for a, agent in enumerate(AGENTS):
                text = f"Member {agent} of {team} for {user} likes {WORDS[(t + a) % 10]}: {ALL}."
                rows.append(
                    gate.memory_row(
                        user_id=user,
                        agent_id=agent,
                        team=team,
                        kind="preference",
                        text=text,
                        source="agent",
                        evidence=[],
                        now=now,
                    )
                )
    with session_scope(engine) as s:
        gate.insert_memories(s, rows, [])
    outbox.drain(rt, render=False)
    return rt


@settings(max_examples=2000, deadline=None)
@given(
    user=st.sampled_from(USERS),
    team=names,
    agent=st.sampled_from(AGENTS),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
)
def test_a_member_reads_only_its_own_teams_memory(user, team, agent, words):
    rt = store()
    found = team_recall(rt, Member(user, agent, team), " ".join(words), k=50)
    assert len(found.hits) == len(TEAM_KINDS)  # every query reaches all of its team's memory
    for hit in found.hits:
        assert hit.kind in TEAM_KINDS and f"Team {team} of {user} " in hit.text, hit.text
    with session_scope(rt.engine) as s:
        rows = [s.get_one(Memory, h.memory_id) for h in found.hits]
    assert all(is_team_memory(m, user, team) for m in rows)
