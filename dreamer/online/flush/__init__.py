"""Daily notes: `trigger` meters a live session and says when a flush is due, `runner` runs
it off the request path, `notes` writes the notes.

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
