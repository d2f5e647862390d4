"""Compaction of a long task's active context, the pure part.

`policy` counts and decides when a compaction is needed; `plan` drafts what is cleared and the
history a summary reads; `fill` fills a budget newest first, the older span offloaded whole;
`decide` picks the path.

May import: `dreamer.core` only."""
