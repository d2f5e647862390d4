"""The progress bar of long commands: a Rich bar on stderr while the work runs, only when stderr
is a terminal (a pipe or a log gets the summary line alone)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from dreamer.cli import err

if TYPE_CHECKING:
    from dreamer.engine.runs import PassStep

Update = Callable[..., None]  # rich's `Progress.update` of the bar's task: completed=, total=, description=


@contextmanager
def progress_bar(description: str, total: int | None = None) -> Iterator[Update]:
    """A bar for the block's work: yields its update (a no-op when stderr is not a terminal)."""
    if not err.is_terminal:
        yield _ignore
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(description, total=total)

        def update(**fields: Any) -> None:
            bar.update(task, **fields)

        yield update


def _ignore(**fields: Any) -> None:
    pass


def pass_step(update: Update, label: str = "sessions") -> Callable[[PassStep], None]:
    """A pass's `on_step`: its sessions on the bar, its model calls and tokens beside them."""

    def step(at: PassStep) -> None:
        calls = f" · LLM {at.calls} call(s), {at.tokens} tokens" if at.calls else ""
        update(completed=at.sessions, total=at.total, description=f"{label}{calls}")

    return step
