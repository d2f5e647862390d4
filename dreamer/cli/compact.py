"""`dreamer compact FILE --budget N` and `dreamer restore MARKER`: a chat compacted from the shell,
its offloaded bodies kept as files (one JSON each, in `DATA_DIR/offloaded` unless told) and read
back by a marker's id."""

from __future__ import annotations

import json
import re
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import typer

from dreamer.cli import app, err, print_json, settings_of

OFFLOAD_ID = re.compile(r"\bofl_[0-9A-Za-z]+\b")


def read_chat(path: Path) -> list[dict[str, Any]]:
    """The messages of a chat file: a JSON list, a JSON ``{"messages": [...]}``, or JSONL with
    one message a line; `IngestError` in one line naming what is wrong."""
    from dreamer.core.errors import IngestError
    from dreamer.eval.compaction_cases import message_problem

    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise IngestError(f"{path}: not UTF-8 text") from None
    messages = _parsed(path, text)
    if not messages:
        raise IngestError(f"{path}: no messages")
    if problem := message_problem(messages):
        raise IngestError(f"{path}: {problem}")
    return messages


def _parsed(path: Path, text: str) -> list[Any]:
    from dreamer.core.errors import IngestError

    try:
        data = json.loads(text)
    except ValueError:
        data = None
        lines = [ln for ln in text.splitlines() if ln.strip()]
        try:
            return [json.loads(ln) for ln in lines]
        except ValueError as exc:
            raise IngestError(f"{path}: neither chat JSON nor JSONL: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        return list(data["messages"])
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "role" in data:
        return [data]  # JSONL of one line
    raise IngestError(f'{path}: expected a list of messages or {{"messages": [...]}}')


def positive(value: str, option: str) -> int:
    from dreamer.core.errors import ConfigError

    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{option} must be a whole number of tokens, not {value!r}") from None
    if number < 1:
        raise ConfigError(f"{option} must be at least 1, not {number}")
    return number


@app.command("compact")
def compact(
    ctx: typer.Context,
    path: Path = typer.Argument(..., metavar="FILE", help='A chat: JSON list, {"messages": [...]}, or JSONL.'),
    budget: str = typer.Option(..., "--budget", metavar="N", help="Tokens the result must fit."),
    out_path: Path = typer.Option(None, "--out", metavar="PATH", help="Where the result goes; default stdout."),
    offloads: Path = typer.Option(
        None, "--offloads", metavar="DIR", help="Where bodies go; default DATA_DIR/offloaded."
    ),
    no_model: bool = typer.Option(False, "--no-model", help="Never summarise, even with a model configured."),
) -> None:
    """Compact a chat to fit a budget: old tool output and whole old turns offloaded to markers
    (restore them with `dreamer restore`), the older span summarised when a model is configured."""
    from dreamer.core.errors import IngestError
    from dreamer.online.compaction.compact import compact_messages

    number = positive(budget, "--budget")
    if not path.is_file():
        raise IngestError(f"{path}: no such file")
    messages = read_chat(path)
    settings = settings_of(ctx)
    folder = offloads or settings.data_dir / "offloaded"
    with _model(settings, no_model) as llm:
        found = compact_messages(settings, llm, messages, budget=number)
    folder.mkdir(parents=True, exist_ok=True)
    for o in found.offloads:
        body = {"id": o.id, "role": o.role, "tool": o.tool, "tool_call_id": o.tool_call_id, "tokens": o.tokens}
        (folder / f"{o.id}.json").write_text(json.dumps({**body, "content": o.body}, ensure_ascii=False))
    answer = found.as_json()
    if out_path is None:
        print_json(answer)
    else:
        out_path.write_text(json.dumps(answer, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    err.print(
        f"compact: {found.path}, {found.tokens_before} -> {found.tokens_after} tokens of {found.budget} "
        f"({found.counter}), {len(found.offloads)} offloaded to {folder}, {found.model_calls} model call(s)"
        + (f"; {found.reason}" if found.reason else ""),
        markup=False,
    )


def _model(settings: Any, no_model: bool) -> Any:
    if no_model or not settings.llm_configured:
        return nullcontext(None)
    from dreamer.eval.compaction import scratch_endpoint

    return scratch_endpoint(settings)


@app.command("restore")
def restore(
    ctx: typer.Context,
    marker: str = typer.Argument(..., metavar="MARKER", help="A marker's text, or the id in it (ofl_...)."),
    offloads: Path = typer.Option(None, "--offloads", metavar="DIR", help="Where `compact` put the bodies."),
) -> None:
    """Print the body a marker of `dreamer compact` stands for, as it was."""
    from dreamer.core.errors import ConfigError, NotFound

    found = OFFLOAD_ID.search(marker)
    if found is None:
        raise ConfigError(f"no offload id (ofl_...) in {marker!r}")
    folder = offloads or settings_of(ctx).data_dir / "offloaded"
    file = folder / f"{found.group(0)}.json"
    if not file.is_file():
        raise NotFound(f"no offloaded body {found.group(0)} in {folder}")
    body = json.loads(file.read_text(encoding="utf-8"))["content"]
    sys.stdout.write(body if body.endswith("\n") else body + "\n")
