"""Watching the Markdown views while `serve` or `run` is up: every few seconds the files of each
user's folder are looked at (size and modification time, then the hash of what changed), and a
view a person edited is read back and rendered again (`outbox.sync_views`)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from dreamer.core.errors import DreamerError
from dreamer.engine import outbox
from dreamer.engine.markdown import sync as view_sync
from dreamer.engine.runtime import Runtime

log = logging.getLogger(__name__)

Signature = tuple[tuple[str, int, int], ...]


def signature(base: Path) -> Signature:
    """Name, size and modification time of each view file of a folder: cheap to compare."""
    out = []
    for rel in view_sync.view_files(base):
        try:
            st = (base / rel).stat()
        except OSError:
            continue
        out.append((rel, st.st_size, st.st_mtime_ns))
    return tuple(out)


class ViewWatcher:
    """Polls the workspace for edited views; `poll` once, or `start` a thread that polls."""

    def __init__(self, rt: Runtime, interval: float) -> None:
        self.rt = rt
        self.interval = interval
        self.seen: dict[Path, Signature] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> list[view_sync.ViewReport]:
        """Read back every view whose files changed since the last poll and differ from their render."""
        workspace = self.rt.settings.workspace_dir
        folders = sorted(p for p in workspace.iterdir() if p.is_dir()) if workspace.is_dir() else []
        users = []
        for base in folders:
            sig = signature(base)
            if self.seen.get(base) == sig:
                continue
            self.seen[base] = sig
            owner = view_sync.state_owner(base)
            if owner is not None and view_sync.touched(base):
                users.append(owner)
        reports = outbox.sync_views(self.rt, users) if users else []
        for base in folders:  # the render rewrote them: not a change to look at again
            self.seen[base] = signature(base)
        return reports

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                for r in self.poll():
                    log.info("view of %s read back: %d edits", r.user_id, len(r.applied))
            except (DreamerError, OSError) as exc:
                log.error("reading the Markdown views back failed: %s", exc)

    def start(self) -> ViewWatcher:
        """Poll every `interval` seconds in a thread of its own (none at 0)."""
        if self.interval > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="dreamer-view-watch", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
