"""Compaction of an agent's active context, online: `compact` (the API behind
`POST /v1/context/compact`), `summary` (the summary call) and `hook` (PreCompact).

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
