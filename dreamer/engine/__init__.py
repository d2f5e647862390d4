"""The dream pass and everything that changes the record offline.

`dream` runs a pass: `due` picks sessions, `group` leases and loads them, `extraction/` reads
them with the model, `consolidation/` decides and applies, `markdown/` renders the human view,
`outbox` keeps the index in step. `records/` holds what changes the record after the fact
(forget, revert, review, reprocess, export and import); `rules/` the extractor that needs no
model; `code_work/` experience and project state.

May import: `dreamer.core` and the adapters (`store`, `index`, `embed`, `llm`, `providers`)."""
