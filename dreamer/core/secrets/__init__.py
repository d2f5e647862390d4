"""Secrets: what `redact` finds and replaces before any text is stored, sent or written.

`redact` is the one entry; `rules` (formats), `prose` and `meaning` (secrets said in words),
`words` (the labels, per language), `shapes` (what a secret's value looks like) and `tables`
(secrets laid out in tables) are the rules it applies.

May import: `dreamer.core` only."""
