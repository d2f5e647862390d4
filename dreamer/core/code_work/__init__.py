"""Code work, the pure part: experience entries and project state fields.

`experience` is their lifecycle, `experience_rank` how they are read at a task's start,
`project_state` what a workspace says about a state's evidence, `propagate` which of them a
change sends to review.

May import: `dreamer.core` only."""
