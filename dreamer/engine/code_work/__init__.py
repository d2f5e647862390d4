"""Code work in the engine: project states and experience entries through their lifecycle.

`book` writes them, `changes` sends what rests on a change to review, `dream` proposes entries
from a code-mode pass, `search` is the task-start read, `tasks` the task-end entry, and `served`
what recall and the context block carry of them.

May import: `dreamer.core`, the adapters, and other `dreamer.engine` modules."""
