"""`dreamer bench`: seeded performance benchmarks. `suite` runs them; `recall`, `dream_pass`,
`consolidate`, `flush` and `modes` are the benches; `fixtures` what they share.

May import: every layer below `dreamer.eval`."""
