"""The Markdown view a person reads and edits, both ways.

`views` writes the files, `render` decides their content, `entries` is one bullet line, `code`
the code-work file, `edits` reads what a person changed, `sync` brings those edits back to SQL.

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
