"""Changes to the record after the fact: forget (`cascade`, and `erasure`: no copy left in any
file), `revert`, `review`, `reprocess`, and export and import (`transfer`).

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
