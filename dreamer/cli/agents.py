"""CLI for agents on this machine: the MCP server over stdio, Claude Code hooks, watched sources."""

from __future__ import annotations

import json
import os
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from dreamer.cli import app, command_group, err, failure, out, print_json, settings_of
from dreamer.cli.records import open_store, prepare

if TYPE_CHECKING:
    from dreamer.core.settings import Settings

hooks_app = command_group("hooks", "Install dreamer's Claude Code hooks.")
sources_app = command_group("sources", "Watched transcript folders (DREAMER_SOURCES).")

HOOK_LOG = "logs/hooks.log"  # under the data dir


@app.command("mcp")
def mcp_cmd(
    ctx: typer.Context,
    user: str = typer.Option(None, "--user", metavar="USER", help="Whose memories (default: DREAMER_LOCAL_USER)."),
    agent: str = typer.Option(None, "--agent", metavar="AGENT", help="Agent id (default: DREAMER_LOCAL_AGENT)."),
    team: str = typer.Option(None, "--team", metavar="TEAM", help="Team (default: DREAMER_LOCAL_TEAM)."),
    read_only: bool = typer.Option(False, "--read-only", help="Only the read tools (as DREAMER_LOCAL_ROLE=reader)."),
) -> None:
    """Run the MCP server over stdio (for an MCP client that starts it, e.g. in `mcpServers`)."""
    from dreamer.embed.threads import set_embedder_threads
    from dreamer.engine.shared_index import open_shared_runtime
    from dreamer.online.auth import local_grant
    from dreamer.online.flush.trigger import validate_flush_settings
    from dreamer.online.mcp.server import Grants, build_mcp

    settings = settings_of(ctx)
    validate_flush_settings(settings)
    grant = local_grant(settings, user=user, agent=agent, team=team, read_only=read_only)
    set_embedder_threads(settings.serve_torch_threads)  # one query at a time, as a server
    with open_shared_runtime(settings, engine=prepare(settings)) as rt:  # the index in turns, per call
        build_mcp(rt, Grants(local=grant), turns=True).run("stdio")


@app.command("hook")
def hook_cmd(
    ctx: typer.Context,
    event: str = typer.Argument(
        ..., metavar="EVENT", help="SessionStart, UserPromptSubmit, PreCompact, Stop or SessionEnd."
    ),
) -> None:
    """Run a Claude Code hook on the JSON it sends on stdin. Never fails the agent's turn: a
    problem is one line in <data dir>/logs/hooks.log and on stderr, and the exit status is 0."""
    raw = sys.stdin.read()
    settings: Settings | None = None
    try:
        settings = settings_of(ctx)
    except Exception as exc:
        _hook_failed(None, event, exc)
        return
    result: dict[str, Any] = {}
    worker = threading.Thread(target=_hook_work, args=(settings, event, raw, result), daemon=True, name="hook")
    worker.start()
    worker.join(settings.hook_timeout_seconds)
    if worker.is_alive():
        _hook_log(settings, event, f"gave up after {settings.hook_timeout_seconds:g} s (DREAMER_HOOK_TIMEOUT_SECONDS)")
        sys.stdout.flush()
        os._exit(0)  # the work left behind is abandoned; SQL rolls back what it had not committed
    if "error" in result:
        _hook_failed(settings, event, result["error"])
    elif result.get("output") is not None:
        sys.stdout.write(json.dumps(result["output"], ensure_ascii=False) + "\n")


def _hook_work(settings: Settings, event: str, raw: str, result: dict[str, Any]) -> None:
    from dreamer.engine.runtime import UNSET
    from dreamer.engine.shared_index import open_shared_runtime
    from dreamer.online.auth import local_grant
    from dreamer.online.claude_hooks import needs_index, read_input, run_hook

    try:
        hook = read_input(event, raw)
        grant = local_grant(settings)
        embedder = UNSET if needs_index(hook.event, settings) else None  # no model loaded for what SQL answers
        with open_shared_runtime(settings, engine=prepare(settings), embedder=embedder) as rt:
            result["output"] = run_hook(rt, grant.scope, hook)
    except Exception as exc:  # a hook never fails the turn: every failure is logged, in one line
        result["error"] = exc


def _hook_failed(settings: Settings | None, event: str, exc: BaseException) -> None:
    problem = failure(exc) if isinstance(exc, Exception) else None
    _hook_log(settings, event, problem or f"{type(exc).__name__}: {' '.join(str(exc).split())}")


def _hook_log(settings: Settings | None, event: str, message: str) -> None:
    """One line on stderr and, when the data dir is known and writable, in its hooks log."""
    line = f"dreamer hook {event}: {' '.join(message.split())}"
    err.print(line, markup=False)
    if settings is None:
        return
    try:
        path = settings.data_dir / HOOK_LOG
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{datetime.now(UTC).isoformat(timespec='seconds')} {line}\n")
    except OSError:
        pass  # stderr has it; a hook must not fail for its log


@hooks_app.command("install")
def hooks_install(
    ctx: typer.Context,
    project: Path = typer.Option(
        None, "--project", metavar="DIR", help="Write DIR/.claude/settings.json (default: the current folder)."
    ),
    user_level: bool = typer.Option(False, "--user", help="Write ~/.claude/settings.json (every project)."),
    print_only: bool = typer.Option(False, "--print", help="Print the hook entries instead of writing them."),
) -> None:
    """Add dreamer's hooks to a Claude Code settings file, keeping every other hook there;
    running it again changes nothing more."""
    from dreamer.online.claude_hooks import hook_entries, merge_hooks

    if project is not None and user_level:
        raise typer.BadParameter("give --project DIR or --user, not both")
    settings = settings_of(ctx)
    launcher = [sys.executable, "-m", "dreamer", "--data-dir", str(settings.data_dir.resolve())]
    entries = hook_entries(launcher, settings.hook_timeout_seconds)
    if print_only:
        print_json({"hooks": entries})
        return
    target = (Path.home() if user_level else (project or Path.cwd())) / ".claude" / "settings.json"
    current = _read_settings(target)
    merged = merge_hooks(current, entries)
    if merged == current:
        out.print(f"{target}: dreamer's hooks are already there", markup=False)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".dreamer-tmp")
    tmp.write_text(json.dumps(merged, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tmp.replace(target)
    out.print(f"{target}: dreamer's hooks written ({', '.join(entries)})", markup=False)


def _read_settings(path: Path) -> dict[str, Any]:
    from dreamer.core.errors import ConfigError

    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid JSON ({exc}): fix it by hand first, nothing was written") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} is not a JSON object: fix it by hand first, nothing was written")
    return data


@sources_app.command("ls")
def sources_ls(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """The watched folders, the files each holds now, and how far each file was read."""
    from dreamer.ingest.watch import file_states, parse_sources

    settings = settings_of(ctx)
    sources = parse_sources(settings.sources)
    engine = open_store(settings)
    try:
        shown = [_source_json(src, file_states(engine, src.folder)) for src in sources]
    finally:
        engine.dispose()
    if as_json:
        print_json(shown)
        return
    if not shown:
        out.print("no watched sources (set DREAMER_SOURCES)", markup=False)
    for src in shown:
        _print_source(src)


@sources_app.command("ingest")
def sources_ingest(ctx: typer.Context, as_json: bool = typer.Option(False, "--json")) -> None:
    """Ingest now what the watched folders' files gained (as the daemon does before each pass)."""
    from dataclasses import asdict

    from dreamer.ingest.watch import ingest_sources, parse_sources

    settings = settings_of(ctx)
    parse_sources(settings.sources)  # a malformed setting is one line, before the store opens
    engine = prepare(settings)
    try:
        outcomes = ingest_sources(engine, settings)
    finally:
        engine.dispose()
    if as_json:
        print_json([asdict(o) for o in outcomes])
        return
    for o in outcomes:
        out.print(f"{o.path}: {o.status}, {o.added} message(s) added", markup=False)
        if o.problem:
            err.print(f"{o.path}: {o.problem}", markup=False)


def _source_json(src: Any, states: list[Any]) -> dict[str, Any]:
    folder = src.folder
    problem = None if folder.is_dir() else "not a folder (or missing)"
    present = {str(p.resolve()) for p in src.files()} if problem is None else set()
    files = [
        {
            "path": st.path,
            "offset": st.offset_bytes,
            "size": st.size_bytes,
            "messages": st.messages,
            "sessions": st.sessions,
            "last_seen": st.last_seen_at.isoformat(),
            "ingested": st.ingested_at.isoformat() if st.ingested_at else None,
            "problem": st.problem,
        }
        for st in states
    ]
    read = {f["path"] for f in files}
    files += [{"path": p, "offset": 0, "problem": "not read yet"} for p in sorted(present - read)]
    return {
        "path": str(folder),
        "format": src.format,
        "user_id": src.user_id,
        "pattern": src.glob,
        "files": len(present),
        "problem": problem,
        "watched": files,
    }


def _print_source(src: dict[str, Any]) -> None:
    head = f"{src['path']} ({src['format']}, user {src['user_id']}, {src['pattern']}): {src['files']} file(s)"
    out.print(head + (f"  PROBLEM: {src['problem']}" if src["problem"] else ""), markup=False)
    for f in src["watched"]:
        seen = f.get("last_seen", "-")
        line = f"  {f['path']}  offset {f['offset']}  messages {f.get('messages', 0)}  last seen {seen}"
        out.print(line + (f"  PROBLEM: {f['problem']}" if f.get("problem") else ""), markup=False)
