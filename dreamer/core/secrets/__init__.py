"""Secrets: what `redact` finds and replaces before any text is stored, sent or written.

`redact` is the one entry. It applies `vendors` (token formats, from detect-secrets), `rules`
(the formats detect-secrets knows less of), `prose` and `meaning` with `words` and `shapes`
(secrets said in words, in seven languages), and `structure`: a label of `labels` (the table
`labels.json`, data, 67 languages) near a value of a shape of `values`, in any language.

May import: `dreamer.core` only."""
