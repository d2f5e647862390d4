"""The bottom floor: the record's tables, scope, settings, errors and every pure policy.

Holds the SQL models (`models`), whose memories a call may touch (`scope`), the one exception
tree (`errors`), token counting, and the pure decisions of consolidation, topics, expiry and
changesets. Sub-folders: `secrets/` (what is redacted), `trust/` (steering, grounding and the
text of a memory on its way in), `code_work/` (experience and project state), `compaction/`
(long tasks) and `settings/` (the one `Settings`).

May import: nothing of dreamer outside `dreamer.core`."""
