"""What a workspace says about a state's evidence (pure): the files it names, hashed as they are
now, and the commit the workspace is at.

Files decide: a state whose evidence names files holds while each file has the recorded content
hash, whatever the commit. A state whose evidence names only a commit holds while the workspace
is at that commit (checked only when the workspace is a git repository). A state with neither
rests on nothing a workspace can show, and is left as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

HASH_PREFIX = "sha256:"


def normal_hash(value: str) -> str:
    """`sha256:HEX` whatever way it was written (a bare hex digest included)."""
    v = value.strip().lower()
    return v if v.startswith(HASH_PREFIX) else HASH_PREFIX + v


@dataclass(frozen=True)
class Stale:
    """A piece of evidence that no longer holds: `target` names what changed (`file:PATH` or
    `commit:SHA`), `reason` says how."""

    target: str
    reason: str


def evidence_files(evidence: Mapping[str, object]) -> dict[str, str]:
    """The `files` of an evidence as {path: sha256:HEX}; anything else in it is ignored."""
    files = evidence.get("files")
    if not isinstance(files, Mapping):
        return {}
    return {str(p): normal_hash(str(h)) for p, h in files.items() if isinstance(h, str) and h.strip()}


def stale_evidence(evidence: Mapping[str, object], current: Mapping[str, str | None], head: str | None) -> list[Stale]:
    """What of `evidence` the workspace contradicts. `current` maps each path to its hash now
    (None when the file is gone); `head` is the workspace's commit (None when not a repository)."""
    files = evidence_files(evidence)
    out: list[Stale] = []
    for path, recorded in sorted(files.items()):
        now = current.get(path)
        if now is None:
            out.append(Stale(f"file:{path}", f"file {path} is gone (was {recorded[:19]})"))
        elif normal_hash(now) != recorded:
            out.append(Stale(f"file:{path}", f"file {path} changed ({recorded[:19]} -> {normal_hash(now)[:19]})"))
    commit = evidence.get("commit")
    if not files and isinstance(commit, str) and commit and head is not None:
        if not (head.startswith(commit) or commit.startswith(head)):
            out.append(Stale(f"commit:{commit}", f"the workspace is at {head[:12]}, not at {commit[:12]}"))
    return out
