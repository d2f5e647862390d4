"""The admin CLI. Settings are read once here, at the edge, and passed in."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

import typer
from rich.console import Console
from typer.core import TyperCommand
from typer.models import CommandFunctionType

if TYPE_CHECKING:
    from sqlalchemy.exc import SQLAlchemyError

    from dreamer.core.settings import Settings

ID_MAX = 2**63 - 1  # the largest SQL integer: ids, limits and budgets above it cannot be stored or asked for


class PlainCommand(TyperCommand):
    """A command whose help lists an argument by its name (`QUERY`, `WHICH`), never its Python
    type, as options show their metavar."""

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args: list[tuple[str, str]] = []
        opts: list[tuple[str, str]] = []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append(((param.metavar or param.name or "").upper(), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class PlainTyper(typer.Typer):
    """A Typer whose commands are `PlainCommand`s."""

    def command(self, *args: Any, **kwargs: Any) -> Callable[[CommandFunctionType], CommandFunctionType]:
        kwargs.setdefault("cls", PlainCommand)
        return super().command(*args, **kwargs)


app = PlainTyper(
    name="dreamer",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="dreamer: the memory back office for AI agents.",
)


def command_group(name: str, help: str) -> PlainTyper:
    """A group of subcommands under `app`. Help is plain text: options show a metavar
    (`ID`, `USER`, `PATH`), never a Python type, and no rich panels are loaded to print it."""
    group = PlainTyper(no_args_is_help=True, add_completion=False, rich_markup_mode=None, help=help)
    app.add_typer(group, name=name)
    return group


out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@app.callback()
def _root(
    ctx: typer.Context,
    data_dir: str = typer.Option(None, "--data-dir", metavar="PATH", help="Overrides DREAMER_DATA_DIR."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at INFO level to stderr."),
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if data_dir is not None and not data_dir.strip():
        from dreamer.core.errors import ConfigError

        raise ConfigError("--data-dir is empty: give a folder")
    ctx.obj = Edge({"data_dir": data_dir} if data_dir else {})


@dataclass
class Edge:
    """What the root options decided: the settings, read once, when a command first needs them
    (a help page needs none)."""

    overrides: dict[str, Any]
    loaded: Settings | None = field(default=None, repr=False)

    def settings(self) -> Settings:
        if self.loaded is None:
            from dreamer.core.settings import load_settings

            self.loaded = load_settings(**self.overrides)
        return self.loaded


def settings_of(ctx: typer.Context) -> Settings:
    edge: Edge = ctx.find_root().obj
    return edge.settings()


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n")


def main() -> None:
    """Console entry point: expected failures are one line on stderr and exit 1."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        sys.exit(130)
    except Exception as exc:
        problem = failure(exc)
        if problem is None:
            raise
        err.print(f"error: {problem}", markup=False)
        sys.exit(1)


def failure(exc: Exception) -> str | None:
    """The one line an expected failure is told in; None for anything else (a bug keeps its traceback)."""
    from dreamer.core.errors import DreamerError

    log = logging.getLogger("dreamer.cli")
    if isinstance(exc, DreamerError):
        return str(exc)
    if isinstance(exc, OSError):  # the file system refused: a data dir that is a file, no permission, a full disk
        log.debug("file system error", exc_info=True)
        return os_problem(exc)
    if is_database_error(exc):  # the database refused: read-only, locked, full
        from dreamer.store.db import database_problem

        log.debug("database error", exc_info=True)
        return f"the database refused: {database_problem(exc)}"
    if isinstance(exc, UnicodeEncodeError):
        return unencodable(exc)
    return None


def is_database_error(exc: Exception) -> TypeGuard[SQLAlchemyError]:
    """Whether the database refused; SQLAlchemy is only asked if it was loaded (else it did not)."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    return sa_exc is not None and isinstance(exc, sa_exc.SQLAlchemyError)


def unencodable(exc: UnicodeEncodeError) -> str:
    """An argument (or file name) with bytes that are not UTF-8, or text the output cannot show."""
    what = f"{exc.object[exc.start : exc.end]!a}"
    if exc.reason == "surrogates not allowed":  # how undecodable bytes of an argument reach Python
        return f"{what} is not UTF-8 text, which dreamer can neither store nor show: give names and text in UTF-8"
    return f"{what} cannot be shown in the output's encoding ({exc.encoding}): set PYTHONIOENCODING=utf-8"


def os_problem(exc: OSError) -> str:
    """What the file system refused, and where."""
    where = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    from dreamer.core.errors import os_reason

    return f"{os_reason(exc)}: {where}" if where else os_reason(exc)


# The command modules register on `app` as they load (each imports its heavy parts when run).
from dreamer.cli import (  # noqa: E402, F401
    agents,
    cabinet,
    compact,
    experience,
    llm,
    measure,
    online,
    ops,
    passes,
    project,
    records,
    runs,
    sessions,
    teams,
    transfer,
    views,
)
