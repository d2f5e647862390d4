"""The scripted OpenAI-compatible HTTP server: exact, repeatable answers for tests and offline runs.

`server` is the server; `bodies` the JSON it answers with, `reply` one scripted answer, `modes`
the quirks of other servers it can take on, `compact`, `team` and `screen` its answers to those
cards.

May import: `dreamer.core` and `dreamer.llm`."""
