"""What a group of sessions asks between its steps: whether the pass is halted, and whether a
lease it holds is still its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dreamer.core.errors import LeaseLost
from dreamer.store import leases


@dataclass(frozen=True)
class Pace:
    """What a group of sessions asks between its steps: whether to stop before the next session
    (`halted`), and the pass's run lease to keep alive."""

    halted: Callable[[], bool]
    run_lease: leases.HeldLease


def lease_lost(held: leases.HeldLease) -> LeaseLost | None:
    """The lease renewed (when due), or the error saying another worker holds it now."""
    return None if held.keep_alive() else LeaseLost(f"lease {held.name} is held by another worker")
