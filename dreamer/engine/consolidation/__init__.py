"""Consolidation: each candidate decided against what it may repeat or replace, then applied.

`plan` decides, `judge` asks the model when a fact may have changed, `guard` holds a pass that
would take away too much, `apply` writes it all in one transaction.

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
