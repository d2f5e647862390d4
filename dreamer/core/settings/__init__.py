"""The one `Settings` object, read once at the edge (CLI, worker start) and passed in.

`base` holds `Settings` and `load_settings`; `compact`, `modes` and `person` are its parts, kept
apart for size. The names callers use are re-exported here.

May import: `dreamer.core` only."""

from dreamer.core.settings.base import MAX_CONTEXT_BUDGET, MAX_RECALL_K, Settings, load_settings

__all__ = ["MAX_CONTEXT_BUDGET", "MAX_RECALL_K", "Settings", "load_settings"]
