"""The Model Context Protocol server on the official `mcp` SDK, and its tools by area.

`server` builds it; `reads`, `review`, `team` and `compaction` are tool groups; `errors` says a
tool's failure in one line.

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
