"""Secrets: what `redact` finds and replaces before any text is stored, sent or written.

`redact` is the one entry; `rules` (formats), `prose` and `meaning` (secrets said in words),
`words` (the labels, per language), `shapes` (what a secret's value looks like) and `tables`
(secrets laid out in tables) are the rules it applies; `structure` finds secrets in any language
by a label of `labels` (the table `labels.json`, data) near a value of a shape of `values`.

May import: `dreamer.core` only."""
