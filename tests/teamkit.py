"""Test helpers for teams: a live API whose tokens are bound to teams, over a store, the scripted
server (which answers the team card from the request) and a Qdrant Edge index."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from onlinekit import LiveServer, online_runtime, online_settings

from dreamer.core.settings import Settings
from dreamer.engine.runtime import Runtime
from dreamer.index.edge import EdgeIndex
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.online.api import create_app
from dreamer.store import db
from dreamer.store.teams import create_team

EMBED = 64
LEADER = "red-leader-token-0123456789"
MEMBER = "red-member-token-0123456789"
READER = "red-reader-token-0123456789"
BLUE = "blue-leader-token-0123456789"
TEMP_LEAD = "temp-leader-token-0123456789"
TEAM_TOKENS = [
    {"token": LEADER, "user_id": "alice", "agent_id": "lead", "team": "red", "role": "writer"},
    {"token": MEMBER, "user_id": "alice", "agent_id": "coder", "team": "red", "role": "writer"},
    {"token": READER, "user_id": "alice", "agent_id": "viewer", "team": "red", "role": "reader"},
    {"token": BLUE, "user_id": "alice", "agent_id": "boss", "team": "blue", "role": "writer"},
    {"token": TEMP_LEAD, "user_id": "alice", "agent_id": "lead", "team": "scratch", "role": "writer"},
]

ROUND_ONE = [
    {"speaker": "lead", "text": "We chose Postgres over DynamoDB because the reports need joins."},
    {"speaker": "coder", "text": "The import timed out until batching by 500 rows fixed it."},
    {"speaker": "coder", "text": "morning all"},
]
ROUND_TWO = [
    {"speaker": "lead", "text": "Ben knows the billing code best."},
    {"speaker": "coder", "text": "The client deadline is 14 December 2026."},
]


@dataclass
class Live:
    url: str
    rt: Runtime
    root: Path
    scripted: ScriptedServer


@contextmanager
def team_api(root: Path) -> Iterator[Live]:
    """The API with teams red and blue (persistent, led by `lead` and `boss`) and scratch (temporary)."""
    settings = online_settings(Settings(_env_file=None, data_dir=root / "data"), api_tokens=json.dumps(TEAM_TOKENS))
    engine = db.make_engine(f"sqlite:///{root / 'store.db'}")
    db.upgrade(engine)
    create_team(engine, "alice", "red", "lead")
    create_team(engine, "alice", "blue", "boss")
    create_team(engine, "alice", "scratch", "lead", temporary=True)
    with ScriptedServer(embed_dim=EMBED) as scripted:
        rt = online_runtime(settings, engine, scripted, EdgeIndex(root / "edge", EMBED), llm=True)
        try:
            with LiveServer(create_app(rt)) as server:
                yield Live(server.url, rt, root, scripted)
        finally:
            rt.close()
            engine.dispose()
