"""The admin CLI. Settings are read once here, at the edge, and passed in."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

import typer
from rich.console import Console
from sqlalchemy.exc import SQLAlchemyError

from dreamer.core.errors import ConfigError, DreamerError, os_reason
from dreamer.core.settings import Settings, load_settings
from dreamer.store.db import database_problem

ID_MAX = 2**63 - 1  # the largest SQL integer: ids, limits and budgets above it cannot be stored or asked for

app = typer.Typer(
    name="dreamer",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="dreamer: the memory back office for AI agents.",
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


@app.callback()
def _root(
    ctx: typer.Context,
    data_dir: str = typer.Option(None, "--data-dir", help="Overrides DREAMER_DATA_DIR."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at INFO level to stderr."),
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if data_dir is not None and not data_dir.strip():
        raise ConfigError("--data-dir is empty: give a folder")
    overrides: dict[str, Any] = {"data_dir": data_dir} if data_dir else {}
    ctx.obj = load_settings(**overrides)


def settings_of(ctx: typer.Context) -> Settings:
    return ctx.obj


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, default=str, ensure_ascii=False) + "\n")


def main() -> None:
    """Console entry point: expected failures are one line on stderr and exit 1."""
    from dreamer.cli import cabinet, measure, online, ops, records  # noqa: F401  (register commands)

    try:
        app()
    except DreamerError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(1)
    except OSError as exc:  # the file system refused: a data dir that is a file, no permission, a full disk
        logging.getLogger("dreamer.cli").debug("file system error", exc_info=True)
        err.print(f"error: {os_problem(exc)}", markup=False)
        sys.exit(1)
    except SQLAlchemyError as exc:  # the database refused: read-only, locked, full
        logging.getLogger("dreamer.cli").debug("database error", exc_info=True)
        err.print(f"error: the database refused: {database_problem(exc)}", markup=False)
        sys.exit(1)
    except UnicodeEncodeError as exc:
        err.print(f"error: {unencodable(exc)}", markup=False)
        sys.exit(1)
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        sys.exit(130)


def unencodable(exc: UnicodeEncodeError) -> str:
    """An argument (or file name) with bytes that are not UTF-8, or text the output cannot show."""
    what = f"{exc.object[exc.start : exc.end]!a}"
    if exc.reason == "surrogates not allowed":  # how undecodable bytes of an argument reach Python
        return f"{what} is not UTF-8 text, which dreamer can neither store nor show: give names and text in UTF-8"
    return f"{what} cannot be shown in the output's encoding ({exc.encoding}): set PYTHONIOENCODING=utf-8"


def os_problem(exc: OSError) -> str:
    """What the file system refused, and where."""
    where = " -> ".join(str(p) for p in (exc.filename, exc.filename2) if p is not None)
    return f"{os_reason(exc)}: {where}" if where else os_reason(exc)
