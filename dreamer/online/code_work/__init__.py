"""Memory for code work online: `calls` (request shapes and the one entry), `routes` (HTTP),
`tools` (MCP) and `trace` (the code-work part of a trace).

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
