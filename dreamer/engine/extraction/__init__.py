"""Extraction: a session's lines in, grounded and checked candidates out.

`transcript` renders the lines a model reads, `extract` and `group` make the calls, `grounding`
keeps only what the cited lines say, `untrusted` marks steering text.

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
