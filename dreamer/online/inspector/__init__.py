"""The inspector at `/ui`: server-rendered pages, their queries, actions and logins.

`pages` routes and renders (`templates/`), `queries` reads, `actions` and `person` write what a
person does by hand, `login` keeps the inspector's sessions.

May import: `dreamer.core`, the adapters, `dreamer.engine` and other `dreamer.online` modules."""
