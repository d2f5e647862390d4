"""Watched transcript folders: a file appended between passes yields each message once, a line
still being written waits, a truncated or rewritten file is read again and said, the daemon
ingests before its pass, and `dreamer sources` shows what it sees."""

from __future__ import annotations

import json

import pytest
from claudekit import SESSION, append_turns, turn
from clikit import assert_one_error_line, run
from dreamkit import EMBED_DIM, make_index, make_runtime
from sqlmodel import col, select

from dreamer.core.errors import ConfigError
from dreamer.core.models import Message, Session, WatchedFile
from dreamer.core.settings import Settings
from dreamer.ingest.watch import ingest_sources, parse_sources
from dreamer.llm.scripted.server import ScriptedServer
from dreamer.store.db import session_scope
from workers.scheduler import InlineExecutor


def watching(folder, **extra) -> str:
    return json.dumps([{"path": str(folder), "format": "claude-code", "user_id": "alice", **extra}])


def stored(engine) -> list[tuple[str, str, int, str]]:
    with session_scope(engine) as s:
        rows = s.exec(
            select(Session.external_id, Message.role, Message.seq, Message.content)
            .join(Session, col(Session.id) == col(Message.session_id))
            .order_by(col(Session.external_id), col(Message.seq))
        ).all()
    return [tuple(r) for r in rows]


def statuses(outcomes) -> list[tuple[str, str, int]]:
    return [(o.path.rsplit("/", 1)[-1], o.status, o.added) for o in outcomes]


def test_an_appended_file_yields_each_message_once(engine, tmp_path):
    folder = tmp_path / "projects" / "travel"
    folder.mkdir(parents=True)
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", sources=watching(tmp_path / "projects"))
    path = folder / f"{SESSION}.jsonl"
    nxt = append_turns(path, ("user", "I prefer night trains."), ("assistant", "Noted."))
    other = folder / "other.jsonl"
    append_turns(other, ("user", "Book me a table."), session="other-session")

    assert statuses(ingest_sources(engine, settings)) == [(f"{SESSION}.jsonl", "new", 2), ("other.jsonl", "new", 1)]

    nxt = append_turns(path, ("user", "And a window seat."), ("assistant", "Sure."), start=nxt)
    with path.open("a") as handle:  # a line Claude Code is still writing: no line break yet
        handle.write(json.dumps(turn(nxt, "user", "Also vegetarian"))[:40])
    assert statuses(ingest_sources(engine, settings)) == [
        (f"{SESSION}.jsonl", "appended", 2),
        ("other.jsonl", "unchanged", 0),
    ]
    row = _row(engine, path)
    assert (row.offset_bytes, row.problem, row.messages) == (path.read_bytes().rfind(b"\n") + 1, None, 4)

    with path.open("a") as handle:  # the line is finished
        handle.write(json.dumps(turn(nxt, "user", "Also vegetarian"))[40:] + "\n")
    assert statuses(ingest_sources(engine, settings)) == [
        (f"{SESSION}.jsonl", "appended", 1),
        ("other.jsonl", "unchanged", 0),
    ]
    assert statuses(ingest_sources(engine, settings))[0] == (f"{SESSION}.jsonl", "unchanged", 0)
    assert stored(engine) == [
        (SESSION, "user", 1, "I prefer night trains."),
        (SESSION, "assistant", 2, "Noted."),
        (SESSION, "user", 3, "And a window seat."),
        (SESSION, "assistant", 4, "Sure."),
        (SESSION, "user", 5, "Also vegetarian"),
        ("other-session", "user", 1, "Book me a table."),
    ]


def test_a_truncated_or_rewritten_file_is_read_again_and_said(sqlite_engine, tmp_path, caplog):
    engine = sqlite_engine
    folder = tmp_path / "watched"
    folder.mkdir()
    settings = Settings(_env_file=None, data_dir=tmp_path / "data", sources=watching(folder))
    cut = folder / "cut.jsonl"
    append_turns(cut, ("user", "One."), ("assistant", "Two."), ("user", "Three."), session="cut")
    changed = folder / "changed.jsonl"
    append_turns(changed, ("user", "I live in Oslo."), ("assistant", "Nice."), session="changed")
    ingest_sources(engine, settings)

    cut.write_text("")
    append_turns(cut, ("user", "One."), session="cut")  # shorter than what was read
    changed.write_text("")
    append_turns(changed, ("user", "I live in Bergen."), ("assistant", "Nice."), ("user", "Yes."), session="changed")
    with caplog.at_level("WARNING"):
        outcomes = ingest_sources(engine, settings)

    assert statuses(outcomes) == [("changed.jsonl", "rewritten", 0), ("cut.jsonl", "truncated", 0)]
    assert [o.problem for o in outcomes] == [
        "rewritten since it was last read, so read again from its start; "
        "1 session(s) whose earlier messages changed were left as stored",
        "truncated since it was last read, so read again from its start",
    ]
    assert [r.message for r in caplog.records if r.name == "dreamer.ingest.watch"] == [
        f"{changed} was rewritten since it was last read: reading it again",
        f"{cut} was truncated since it was last read: reading it again",
    ]
    assert stored(engine) == [  # nothing duplicated, nothing lost
        ("changed", "user", 1, "I live in Oslo."),
        ("changed", "assistant", 2, "Nice."),
        ("cut", "user", 1, "One."),
        ("cut", "assistant", 2, "Two."),
        ("cut", "user", 3, "Three."),
    ]
    append_turns(cut, ("assistant", "Two."), ("user", "Three."), ("assistant", "Four."), start=2, session="cut")
    assert statuses(ingest_sources(engine, settings))[1] == ("cut.jsonl", "appended", 1)
    assert _row(engine, cut).problem is None


def test_the_daemon_ingests_before_its_pass(sqlite_engine, tmp_path):
    folder = tmp_path / "watched"
    folder.mkdir()
    append_turns(folder / "a.jsonl", ("user", "I prefer aisle seats."), ("assistant", "Noted."), session="a")
    settings = Settings(
        _env_file=None, data_dir=tmp_path / "data", sources=watching(folder), min_rounds=1, embed_dim=EMBED_DIM
    )
    with ScriptedServer(embed_dim=EMBED_DIM) as server:
        rt = make_runtime(settings, sqlite_engine, server, make_index("edge", tmp_path), llm=False)
        try:
            ran = InlineExecutor(rt)(lambda: False)
        finally:
            rt.close()
    assert stored(sqlite_engine) == [("a", "user", 1, "I prefer aisle seats."), ("a", "assistant", 2, "Noted.")]
    assert ran.run_id is not None
    with session_scope(sqlite_engine) as s:
        assert s.exec(select(Session.project, Session.mode)).one() == ("travel-planner", "code")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("{", "DREAMER_SOURCES is not valid JSON: Expecting property name enclosed in double quotes at position 1"),
        ('{"path": "x"}', 'DREAMER_SOURCES must be a JSON list of {"path", "format", "user_id", ...} objects'),
        ('[{"path": "x", "format": "word", "user_id": "a"}]', "DREAMER_SOURCES entry 0: format: Input should be"),
        ('[{"path": "x", "format": "openai"}]', "DREAMER_SOURCES entry 0: user_id: Field required"),
    ],
)
def test_a_bad_sources_setting_is_one_error(raw, problem):
    with pytest.raises(ConfigError) as exc:
        parse_sources(raw)
    assert str(exc.value).startswith(problem)


def test_sources_ls_and_ingest_from_the_command_line(tmp_path):
    folder = tmp_path / "watched"
    folder.mkdir()
    path = folder / "a.jsonl"
    append_turns(path, ("user", "Hello."), session="a")
    env = {"DREAMER_SOURCES": watching(folder)}
    assert run(tmp_path, "init").returncode == 0
    before = json.loads(run(tmp_path, "sources", "ls", "--json", env=env).stdout)
    assert before == [
        {
            "path": str(folder),
            "format": "claude-code",
            "user_id": "alice",
            "pattern": "**/*.jsonl",
            "files": 1,
            "problem": None,
            "watched": [{"path": str(path), "offset": 0, "problem": "not read yet"}],
        }
    ]
    ingested = json.loads(run(tmp_path, "sources", "ingest", "--json", env=env).stdout)
    assert [(o["status"], o["added"], o["sessions"]) for o in ingested] == [("new", 1, ["a"])]
    [after] = json.loads(run(tmp_path, "sources", "ls", "--json", env=env).stdout)
    [watched] = after["watched"]
    size = path.stat().st_size
    assert (watched["offset"], watched["size"], watched["messages"], watched["problem"]) == (size, size, 1, None)
    assert_one_error_line(run(tmp_path, "sources", "ls", env={"DREAMER_SOURCES": "[1]"}))


def _row(engine, path) -> WatchedFile:
    with session_scope(engine) as s:
        return s.exec(select(WatchedFile).where(WatchedFile.path == str(path))).one()
