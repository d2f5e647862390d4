"""`dreamer eval profiles`: users whose facts change over time, replayed and scored.

`format` reads a profiles file, `run` replays it through the pipeline, `oracle` holds the
stand-ins, `score` scores what the store holds.

May import: every layer below `dreamer.eval`."""
