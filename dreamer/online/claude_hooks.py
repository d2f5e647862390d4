"""Claude Code hooks: what `dreamer hook <event>` does with the JSON Claude Code sends on stdin,
and the hook entries `dreamer hooks install` merges into a Claude Code settings file.

* SessionStart: the context block, as the session's additional context.
* UserPromptSubmit: the agent is marked busy (the dreamer waits); with `hook_recall_k` > 0 the
  best recall hits for the prompt are added as context.
* PreCompact: the transcript so far is ingested (only what it gained), the session's daily
  notes are flushed before the context is compacted, and the tool output a compaction would
  clear is kept as offloaded bodies (`dreamer.online.compaction.hook`) for `restore_offloaded`.
* Stop, SessionEnd: the transcript's new part is ingested.

Every hook input carries `session_id`, `transcript_path`, `cwd` and `hook_event_name`;
UserPromptSubmit adds `prompt`, PreCompact `trigger`, SessionStart `source`, SessionEnd `reason`.
A hook prints JSON with `hookSpecificOutput.additionalContext` to add context, or nothing.
"""

from __future__ import annotations

import json
import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlmodel import select

from dreamer.core.errors import DreamerError, IngestError
from dreamer.core.models import Session, utcnow
from dreamer.core.scope import Scope
from dreamer.core.secrets.redact import context_markers, new_block_id
from dreamer.core.settings import Settings
from dreamer.core.trust.memory_text import as_data
from dreamer.engine.runtime import Runtime
from dreamer.ingest.claude_code import FORMAT as CLAUDE_CODE
from dreamer.ingest.watch import Outcome, Owner, watch_file
from dreamer.online.compaction.hook import record_would_drop
from dreamer.online.flush.notes import flush_session
from dreamer.online.flush.trigger import MANUAL
from dreamer.online.recall import context, past_mark, recall
from dreamer.store.busy import activity_key
from dreamer.store.db import session_scope

log = logging.getLogger(__name__)

EVENTS = ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd")
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")  # those whose additionalContext Claude Code reads
CLAUDE_TIMEOUT_MARGIN = 10  # seconds Claude Code waits beyond the hook's own bound
HEAD_BYTES = 64  # what `unreadable` reads of a transcript that gave nothing


@dataclass
class HookInput:
    """The fields of a hook's stdin that dreamer reads."""

    event: str
    session_id: str | None = None
    transcript_path: str | None = None
    cwd: str | None = None
    prompt: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def read_input(event: str, raw: str) -> HookInput:
    """The hook input of `event`; IngestError when stdin is not the JSON object Claude Code sends."""
    if event not in EVENTS:
        raise IngestError(f"unknown hook event {event!r}: use one of {', '.join(EVENTS)}")
    try:
        data = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise IngestError(f"hook input is not JSON: {exc.msg} at position {exc.pos}") from exc
    if not isinstance(data, dict):
        raise IngestError("hook input must be a JSON object")

    def text(name: str) -> str | None:
        value = data.get(name)
        return value if isinstance(value, str) and value else None

    return HookInput(event, text("session_id"), text("transcript_path"), text("cwd"), text("prompt"), data)


def needs_index(event: str, settings: Settings) -> bool:
    """Whether the event searches or writes the index (else SQL alone answers it)."""
    return event == "PreCompact" or (event == "UserPromptSubmit" and settings.hook_recall_k > 0)


def run_hook(rt: Runtime, scope: Scope, hook: HookInput) -> dict[str, Any] | None:
    """Do what the event asks; the JSON to print (additional context), or None. With the memory
    mode off, nothing: no context is read and no transcript is stored."""
    if rt.settings.memory_mode == "off":
        log.info("memory mode is off: the %s hook reads and writes nothing", hook.event)
        return None
    if hook.event == "SessionStart":
        return _additional(hook.event, context(rt, scope).text)
    if hook.event == "UserPromptSubmit":
        return _prompt_submitted(rt, scope, hook)
    outcome = _ingest(rt, scope, hook)
    if hook.event == "PreCompact":
        _flush(rt, scope, outcome)
    return None


def _additional(event: str, text: str) -> dict[str, Any] | None:
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


def _prompt_submitted(rt: Runtime, scope: Scope, hook: HookInput) -> dict[str, Any] | None:
    key = activity_key(user_id=scope.user_id, agent_id=scope.agent_id)
    rt.busy.begin(key)
    rt.busy.end(key)  # the agent was active just now: a pass waits `busy_window_seconds`
    k = rt.settings.hook_recall_k
    if k <= 0 or not hook.prompt:
        return None
    now = utcnow()
    hits = [h for h in recall(rt, hook.prompt, scope, k=k, now=now).hits if not h.untrusted]  # as the context block
    if not hits:
        return None
    opening, closing = context_markers(new_block_id())
    lines = [f"- {as_data(h.text)}{past_mark(h.valid_until, now, rt.settings.tz)}" for h in hits]
    return _additional(hook.event, "\n".join([opening, *lines, closing]))


def _ingest(rt: Runtime, scope: Scope, hook: HookInput) -> Outcome:
    if not hook.transcript_path:
        raise IngestError(f"{hook.event} hook input has no transcript_path")
    owner = Owner(scope.user_id, scope.agent_id, scope.team)
    outcome = watch_file(
        rt.engine, Path(hook.transcript_path), CLAUDE_CODE, owner, max_message_bytes=rt.settings.max_message_bytes
    )
    if outcome.status == "missing":
        raise IngestError(f"transcript {hook.transcript_path} {outcome.problem}")
    if problem := unreadable(outcome, Path(hook.transcript_path)):
        raise IngestError(f"transcript {hook.transcript_path} is not a Claude Code transcript: {problem}")
    log.info("%s: %s, %d message(s) added", hook.transcript_path, outcome.status, outcome.added)
    return outcome


def unreadable(outcome: Outcome, path: Path) -> str | None:
    """Why a transcript just read gave nothing a Claude Code transcript holds, or None: no
    message and no session came of it, and either its lines were rejected or it does not open
    like JSON Lines (a system file, a binary one). A file read before and unchanged is None."""
    if outcome.status == "unchanged" or outcome.added or outcome.sessions:
        return None
    if outcome.problem:
        return outcome.problem
    try:
        with path.open("rb") as handle:
            head = handle.read(HEAD_BYTES).lstrip()
    except OSError as exc:
        return f"cannot be read: {exc.strerror or exc}"
    return None if not head or head.startswith(b"{") else "it does not hold JSON lines"


def _flush(rt: Runtime, scope: Scope, outcome: Outcome) -> None:
    for external_id in outcome.sessions:
        with session_scope(rt.engine) as s:
            row = s.exec(
                select(Session)
                .where(Session.user_id == scope.user_id)
                .where(Session.source == CLAUDE_CODE)
                .where(Session.external_id == external_id)
            ).first()
        if row is None or row.id is None:
            continue
        result = flush_session(rt, row.id, trigger=MANUAL)
        log.info("session %s flushed before compaction: %s, %d note(s)", external_id, result.status, len(result.notes))
        record_would_drop(rt, scope, row)  # flushed first: what is cleared was flushed


# --------------------------------------------------------------------------- installing


def hook_command(launcher: list[str], event: str) -> str:
    """The shell command Claude Code runs for `event`."""
    return shlex.join([*launcher, "hook", event])


def hook_entries(launcher: list[str], timeout_seconds: float) -> dict[str, list[dict[str, Any]]]:
    """dreamer's entries, one per event, in Claude Code's `hooks` shape."""
    timeout = int(timeout_seconds) + CLAUDE_TIMEOUT_MARGIN
    return {
        event: [{"hooks": [{"type": "command", "command": hook_command(launcher, event), "timeout": timeout}]}]
        for event in EVENTS
    }


def is_ours(entry: Any, event: str) -> bool:
    """Whether a hook entry is dreamer's for `event` (installed by any launcher)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
        return False
    words = entry["command"].split()
    return len(words) >= 2 and words[-2:] == ["hook", event] and any("dreamer" in w for w in words)


def merge_hooks(settings: dict[str, Any], entries: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """`settings` with dreamer's entries in its `hooks`: an entry of dreamer's already there is
    replaced in place, every other hook is kept as it is; merging twice changes nothing more."""
    merged = dict(settings)
    hooks = dict(merged.get("hooks") or {})
    if not isinstance(merged.get("hooks", {}), dict):
        raise DreamerError("the settings' `hooks` is not a JSON object: fix it by hand first")
    for event, groups in entries.items():
        ours = groups[0]["hooks"][0]
        current = hooks.get(event) or []
        if not isinstance(current, list):
            raise DreamerError(f"the settings' hooks.{event} is not a JSON list: fix it by hand first")
        found = False
        kept = []
        for group in current:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                inner = [ours if is_ours(h, event) else h for h in group["hooks"]]
                found = found or any(is_ours(h, event) for h in group["hooks"])
                group = {**group, "hooks": inner}
            kept.append(group)
        hooks[event] = kept if found else [*kept, *groups]
    merged["hooks"] = hooks
    return merged


__all__ = [
    "EVENTS",
    "HookInput",
    "needs_index",
    "hook_command",
    "hook_entries",
    "is_ours",
    "merge_hooks",
    "read_input",
    "run_hook",
]
