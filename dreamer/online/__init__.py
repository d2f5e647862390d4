"""The online companion: the HTTP API, MCP, hooks, recall, the context block and flushes.

Sub-folders: `mcp/` (the MCP server and its tools), `inspector/` (the web pages at `/ui`),
`flush/` (daily notes), `compaction/` (long tasks), `code_work/` (memory for code work).

May import: `dreamer.core`, the adapters and `dreamer.engine`."""
