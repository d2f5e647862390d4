"""Changes to the record after the fact: forget (`cascade`), `revert`, `review`, `reprocess`,
and export and import (`transfer`).

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
