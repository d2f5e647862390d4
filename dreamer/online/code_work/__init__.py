"""Memory for code work online: `calls` (request shapes and the one entry), `routes` (HTTP),
`tools` (MCP), `trace` (the code-work part of a trace) and `served` (a project's code work in
recall and the context block).

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
