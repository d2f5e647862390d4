"""The inspector at `/ui`: server-rendered pages, their queries, actions and logins.

`pages` routes, `render` renders (`templates/`) with the security headers, `paging` cuts lists
into pages with their totals, `queries` reads, `actions`, `bulk` and `person` write what a
person does by hand, `looking` searches by meaning and previews the context block,
`conversations` browses sessions, `records` exports, imports and forgets, `login` keeps the
inspector's sessions.

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
