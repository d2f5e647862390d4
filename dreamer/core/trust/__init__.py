"""Trust: whether a text may be served as memory, and why not.

`steering` says whether a text addresses the model (reading it with `steering_view`,
`steering_reader` and `steering_words`, `steering_markup`, `steering_decode`, `steering_shapes`); `grounding` (with
`grounding_words`) whether a candidate rests on the lines it cites; `memory_text` is a memory's
text on its way in and out (normalised, redacted, checked).

May import: `dreamer.core` only."""
