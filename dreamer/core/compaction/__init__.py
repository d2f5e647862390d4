"""Compaction of a long task's active context, the pure part.

`policy` counts and decides when a compaction is needed; `plan` drafts what is cleared,
offloaded and summarised.

May import: `dreamer.core` only."""
