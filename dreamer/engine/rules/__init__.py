"""The rules extractor: explicit first-person statements read without a model.

`extractor` is the entry and the triage; `slots`, `casual` and `words` are its patterns.

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
